"""Ctrl-C while a preview command's modules load: exit quietly, without a traceback.

A command spends about half a second importing trio, numpy and the rest before its
``main()`` can catch anything; a Ctrl-C then would print a ``KeyboardInterrupt``
traceback. The first lines of :mod:`examples.preview.server`,
:mod:`examples.preview.cli.client`, :mod:`examples.jobs.server` and
:mod:`examples.jobs.client` call :func:`install` (this module imports only the
standard library's ``os``, ``signal`` and ``sys``), and their ``main()`` calls
:func:`restore` before it takes over. Both ways of running a command are covered:
``python -m`` (the module runs as ``__main__``) and the installed console command
(``trio-actors-preview``: its script imports the module, so ``sys.argv[0]`` names it).
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["exit_quietly", "install", "restore"]


def exit_quietly(signum: int, frame: object) -> None:
    """The SIGINT handler while the modules load: exit at once with status 128 + signum.

    Exits rather than raising: nothing is open or written yet, and an exception raised
    while the interpreter runs a callback of its own (importlib's weakref callbacks,
    say) is printed and dropped, so the command would start anyway.
    """
    os._exit(128 + signum)


def install(module_name: str, command: str) -> None:
    """Exit quietly on Ctrl-C from now on, if this process runs the command.

    Args:
        module_name: The calling module's ``__name__`` (``"__main__"`` under ``python -m``).
        command: The installed console command's name, e.g. ``trio-actors-preview``.
    """
    ours = module_name == "__main__" or os.path.basename(sys.argv[0] or "") == command
    if ours and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, exit_quietly)


def restore() -> None:
    """Give Ctrl-C back to Python (``KeyboardInterrupt``) if :func:`install` took it."""
    if signal.getsignal(signal.SIGINT) is exit_quietly:
        signal.signal(signal.SIGINT, signal.default_int_handler)
