"""Test-suite root: its folder is on ``sys.path`` so ``process_support`` is importable."""
