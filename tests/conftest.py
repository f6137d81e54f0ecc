"""Test-suite root: its folder is on ``sys.path`` so ``process_support`` is importable.

Bytecode caching is turned back on for the run and for every process it starts: the
suite starts hundreds of Python processes (helpers, servers, clients, tutorial
programs), and with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` yet each one
compiles the project's modules from source again, and pytest rewrites every test module
again (the benchmarks clear it for their children likewise). ``__pycache__`` is ignored
by git, and a cache that cannot be written is skipped by Python.
"""

from __future__ import annotations

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
