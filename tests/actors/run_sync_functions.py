"""Functions the ``run_sync`` tests send to helpers by reference (no trio, no attrs).

Imported by the tests (parent) and, lazily, by the helper child through the parent's
``sys.path``. Nothing here waits for time to pass: a call that must stay in flight
waits on an event — one nobody sets (:func:`block`, stopped only by the pool), or a FIFO
the test opens (:func:`gated`), an event across processes.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from actors.helper import JobError


class Point:
    """A plain (numpy-free) object: pickled by value, its class by reference."""

    def __init__(self, x: float, y: float) -> None:
        self.x = x
        self.y = y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))

    @classmethod
    def origin(cls) -> Point:
        return cls(0, 0)

    def norm(self) -> float:
        return float((self.x**2 + self.y**2) ** 0.5)


class Refusal(Exception):
    """An exception that pickles but does not unpickle (its __init__ needs two arguments)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def describe(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Return what it got, and where it ran."""
    return {"args": args, "kwargs": kwargs, "pid": os.getpid()}


def scale(point: Point, factor: float = 1.0) -> Point:
    return Point(point.x * factor, point.y * factor)


def square(x: int) -> int:
    return x * x


def add(x: int, y: int) -> int:
    return x + y


def fail(message: str) -> None:
    def inner() -> None:
        raise ValueError(message)

    inner()


def refuse(what: str) -> None:
    raise Refusal(what, "no reason")


def fail_transiently(message: str) -> None:
    raise JobError(message, code="disk_busy", category="transient")


def make_lock() -> Any:
    """A result that does not pickle."""
    return threading.Lock()


#: Set by nobody: :func:`block` waits on it until the pool stops the helper.
_NEVER = threading.Event()


def block(*_items: object) -> None:
    """Never return by itself (arguments ignored, so a map can feed it): only a
    deadline, a stall or reply timeout, or a cancel (through the pool's ladder) ends it."""
    _NEVER.wait()


def crash(status: int) -> None:
    """Take the helper down (as a segfault would): no reply, no cleanup."""
    sys.stderr.flush()
    os._exit(status)


def crash_once(marker: str) -> str:
    """Crash the first time (no ``marker`` file yet), then succeed."""
    path = Path(marker)
    if not path.exists():
        path.write_text("crashed once")
        os._exit(3)
    return "second time lucky"


def gated(item: int, folder: str) -> tuple[int, int]:
    """Mark this call started, wait at its gate (the FIFO ``folder/gate-<item>``, until
    the test opens it for writing and closes it), and return how many calls were in
    flight when it started, itself included (started minus done, across processes)."""
    base = Path(folder)
    (base / f"started-{item}").touch()
    in_flight = len(list(base.glob("started-*"))) - len(list(base.glob("done-*")))
    with open(base / f"gate-{item}", "rb") as gate:
        gate.read()
    (base / f"done-{item}").touch()
    return item, in_flight


def fail_at(item: int, bad: int) -> int:
    """Fail for item ``bad``; the others :func:`block`."""
    if item == bad:
        raise ValueError(f"item {item} is bad")
    block()
    return item


def where() -> tuple[str, list[str], bool]:
    """The working directory, the path, and whether trio was imported."""
    return os.getcwd(), list(sys.path), "trio" in sys.modules


def identity(value: Any) -> Any:
    return value
