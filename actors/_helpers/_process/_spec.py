"""What a helper runs and its deadlines: spec, timeouts, snapshot (design §3.1-3.3, §3.8).

Also the child bootstrap (``BOOTSTRAP``), the argv that starts a Python-entry helper
without importing trio, attrs or cattrs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Final

import attrs

import protocol.framing
from protocol.framing import DEFAULT_MAX_REPLY, DEFAULT_MAX_REQUEST, MAX_FRAME_LIMIT

from ..._child import FAULT_MODES
from ..._core import duration_field
from ._containment import CONTAINMENT_MODES

__all__ = [
    "BOOTSTRAP",
    "START_METHODS",
    "ZYGOTE_BOOTSTRAP",
    "HelperSnapshot",
    "HelperSpec",
    "HelperTimeouts",
]

#: Smallest allowed frame limit, in bytes: control frames (cancel, shutdown, a ready
#: or error answer) must always fit, whatever the job payloads' limit.
MIN_FRAME_LIMIT: Final = 4096

_ACTORS_DIR: Final = str(Path(__file__).resolve().parents[2])
_PROTOCOL_DIR: Final = str(Path(protocol.framing.__file__).resolve().parent)

#: The program a Python-entry helper runs:
#: ``python -c BOOTSTRAP entry actors protocol count path...``.
#:
#: Why a bootstrap: ``import actors.helper`` would first run ``actors/__init__.py``, which
#: imports trio (about 100 ms), and ``protocol/__init__.py`` imports attrs and cattrs; the
#: helper child needs none of them. So the bootstrap puts bare package objects for
#: ``actors`` and ``protocol`` into ``sys.modules`` (plain module objects with
#: ``__path__`` set to the real package directories): submodules such as
#: ``actors.helper``, ``protocol.envelope``, ``protocol.framing`` and ``protocol.errors``
#: (all stdlib-only) then load from their files without the packages' ``__init__``.
#: The ``actors`` stub carries ``HELPER_CHILD = True``, which
#: :func:`actors.helper.in_helper_child` reads (code shared by parent and child, such as
#: an entry's error classes, can choose what to import with it). Finally it imports the
#: entry's module and calls its function. It imports nothing
#: itself (``type(sys)`` is the module type, ``__import__`` needs no ``importlib``), so the
#: child pays only for what the helper library and the entry import. The child's
#: ``sys.path`` starts with the ``count`` paths that follow (the parent's ``sys.path``
#: when :attr:`HelperSpec.inherit_path` is set, design §3.14), then its own entries not
#: among them: its working directory (``-c`` semantics), ``PYTHONPATH``, site-packages.
BOOTSTRAP: Final = """\
import sys
entry, actors_dir, protocol_dir = sys.argv[1:4]
count = int(sys.argv[4])
inherited = sys.argv[5 : 5 + count]
del sys.argv[1 : 5 + count]
if inherited:
    sys.path[:] = inherited + [path for path in sys.path if path not in inherited]
for name, path in (("actors", actors_dir), ("protocol", protocol_dir)):
    package = type(sys)(name)
    package.__path__ = [path]
    sys.modules[name] = package
sys.modules["actors"].HELPER_CHILD = True
module_name, _, function_name = entry.partition(":")
__import__(module_name)
getattr(sys.modules[module_name], function_name)()
"""

#: The program of a pool's fork server (design §3.17): :data:`BOOTSTRAP` with, between
#: the entry module's import and its function's call, the fork server's loop on the
#: socket at file descriptor 3, which returns only in a forked helper.
ZYGOTE_BOOTSTRAP: Final = BOOTSTRAP.replace(
    "getattr(",
    "__import__('actors._child')\nsys.modules['actors._child'].serve_forks(0)\ngetattr(",
)

#: Values of :attr:`HelperSpec.start_method` (design §3.17).
START_METHODS: Final = ("auto", "spawn", "zygote")


def _check_entry(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is None:
        return
    module, sep, function = str(value).partition(":")
    names = [*module.split("."), function]
    if not isinstance(value, str) or not sep or not all(n.isidentifier() for n in names):
        raise ValueError(f"entry must be 'package.module:function', got {value!r}")


def _check_json(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{attribute.name} must be JSON-compatible: {exc}") from None


def _check_fault(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None and value not in FAULT_MODES:
        raise ValueError(f"fault must be one of {sorted(FAULT_MODES)} or None, got {value!r}")


def _check_limit(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_FRAME_LIMIT <= value <= MAX_FRAME_LIMIT
    ):
        raise ValueError(
            f"{attribute.name} must be an int in [{MIN_FRAME_LIMIT}, 2**32-1] bytes, got {value!r}"
        )


def _check_host(instance: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or value.startswith("-") or value.isspace():
        raise ValueError(f"host must be '[user@]host' or None, got {value!r}")


def _check_port(instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535
    ):
        raise ValueError(f"port must be an int in [1, 65535] or None, got {value!r}")


def _check_ssh_options(
    instance: object, attribute: attrs.Attribute[tuple[str, ...]], value: object
) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"ssh_options must be a sequence of strings, got {value!r}")


def _optional_tuple(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _optional_dict(value: Any) -> dict[str, str] | None:
    return None if value is None else dict(value)


@attrs.frozen(kw_only=True)
class HelperTimeouts:
    """Every deadline of a helper's life, in seconds on trio's clock (design §3.2).

    Each is validated at construction (design §1.6): a number (not a bool), finite,
    ``<= 300``; ``startup``, ``reply`` and ``kill`` must be ``> 0``, the others ``>= 0``.

    Raises:
        ValueError: a field is out of range; the message names the field.
    """

    startup: float = duration_field(10.0, allow_zero=False)
    """Spawn → *ready* (design §3.3)."""
    reply: float = duration_field(10.0, allow_zero=False)
    """Job frame sent → terminal reply (design §3.6)."""
    cancel_grace: float = duration_field(0.75)
    """Cancel frame sent → terminal reply, before SIGTERM (design §3.5 step 1)."""
    shutdown: float = duration_field(2.0)
    """Shutdown frame sent → exited, before SIGTERM (design §3.8)."""
    terminate: float = duration_field(1.0)
    """SIGTERM → reaped, before SIGKILL (design §3.5 step 2)."""
    kill: float = duration_field(1.0, allow_zero=False)
    """SIGKILL → reaped, before quarantine (design §3.5 steps 3-4)."""
    heartbeat: float = duration_field(10.0, allow_zero=False)
    """A helper on another host (design §3.16): the parent sends its warden a heartbeat
    every third of this; the warden kills the helper's tree when no frame came from the
    parent for this long, and the parent gives the link up as lost (``helper_lost``)
    when nothing came back from the warden for this long."""

    @property
    def ladder(self) -> float:
        """Longest a cancelled job's escalation can take: grace + terminate + kill."""
        return self.cancel_grace + self.terminate + self.kill

    @property
    def shutdown_bound(self) -> float:
        """Longest a helper's shutdown can take: shutdown + terminate + kill (§3.8)."""
        return self.shutdown + self.terminate + self.kill

    @property
    def close_bound(self) -> float:
        """Longest a pool's close can take (design §3.13), in seconds.

        ``cancel_grace + shutdown + terminate + kill``: every helper at once, a busy
        one first through its job's ladder (whose cooperative end leaves it to the
        shutdown), then through its shutdown.
        """
        return self.cancel_grace + self.shutdown + self.terminate + self.kill


@attrs.frozen(kw_only=True)
class HelperSpec:
    """What to run as a helper and how (design §3.1, §3.9).

    Exactly one of ``entry`` and ``argv`` is given. ``entry`` runs a Python function in
    a fresh interpreter (``python``), started through a small bootstrap that imports only
    the standard library and :mod:`actors.helper`, never trio, attrs or cattrs (design
    §3.3); ``argv`` runs any program that speaks the helper protocol on its stdin/stdout.

    Raises:
        ValueError: neither or both of ``entry``/``argv``; a malformed ``entry``;
            ``options`` not JSON-compatible; an unknown ``fault``; a limit outside
            ``[4096, 2**32-1]`` bytes; an unknown ``containment`` or ``start_method``;
            ``start_method="zygote"`` with ``argv`` or a ``host``; a ``host`` that is
            empty or starts with ``-``; a ``port`` outside ``[1, 65535]``; ``port``,
            ``identity`` or ``ssh_options`` without a ``host``.
    """

    entry: str | None = attrs.field(default=None, validator=_check_entry)
    """``"package.module:function"``; the function calls :func:`actors.helper.serve`."""
    argv: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    """A raw command line instead of ``entry``."""
    options: Any = attrs.field(factory=dict, validator=_check_json)
    """JSON-compatible settings given to the entry's ``on_startup`` hook."""
    env: dict[str, str] | None = attrs.field(default=None, converter=_optional_dict)
    """Variables added to (overriding) the parent's environment."""
    cwd: str | None = None
    """Working directory of the child; None (the default): the parent's working
    directory at the time the helper starts (design §3.14)."""
    inherit_path: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    """For an ``entry``: put the parent's ``sys.path`` (as it is when the helper starts,
    relative entries made absolute against the parent's working directory) first in the
    child's ``sys.path``, so that whatever the parent imports (its script's directory,
    paths it added at run time), the helper imports too, whatever its ``cwd``
    (design §3.14). False: the child's own ``sys.path`` only (its working directory,
    ``PYTHONPATH``, site-packages), e.g. when ``python`` is another interpreter, whose
    site-packages the parent's would shadow. Ignored for ``argv``."""
    python: str = sys.executable
    """Interpreter that runs ``entry``."""
    name: str = "helper"
    """Label used in errors and snapshots."""
    fault: str | None = attrs.field(default=None, validator=_check_fault)
    """A fault mode of :data:`actors.helper.FAULT_MODES`, for tests (design §3.9)."""
    max_request: int = attrs.field(default=DEFAULT_MAX_REQUEST, validator=_check_limit)
    """Largest job frame payload, in bytes (design §2.2)."""
    max_reply: int = attrs.field(default=DEFAULT_MAX_REPLY, validator=_check_limit)
    """Largest reply frame payload, in bytes (design §2.2)."""
    containment: str = attrs.field(
        default="auto", validator=attrs.validators.in_(CONTAINMENT_MODES)
    )
    """How the helper's process tree is held (design §3.11): ``auto`` (the strongest
    this platform allows), ``cgroup``, ``tree`` or ``group``. On another host, what
    the warden may use there (design §3.16)."""
    host: str | None = attrs.field(default=None, validator=_check_host)
    """``[user@]host``: run the helper on that host, through ``ssh -T`` and a warden
    (design §3.16); None (the default): on this machine. ``~/.ssh/config`` applies.
    ``python`` (the default: this interpreter's path) must then name the remote
    interpreter, which runs the warden too; ``cwd`` and ``env`` apply there;
    ``inherit_path`` is ignored (the remote interpreter must import the project)."""
    port: int | None = attrs.field(default=None, validator=_check_port)
    """The remote host's SSH port (``ssh -p``); None: ssh's own choice."""
    identity: str | None = None
    """A private key file for ``ssh -i``; None: ssh's own choice (agent, config)."""
    ssh_options: tuple[str, ...] = attrs.field(
        default=(), converter=tuple, validator=_check_ssh_options
    )
    """More ``ssh`` arguments, placed before the destination, e.g.
    ``("-o", "StrictHostKeyChecking=yes", "-F", "/path/config")``."""
    stderr_is_activity: bool = attrs.field(
        default=False, validator=attrs.validators.instance_of(bool)
    )
    """Count anything the helper writes to stderr as activity for a job's ``stall``
    timer (design §3.12), as a progress report is: for third-party code that says it is
    alive only on stderr. Off by default: a job that loops while logging is not thereby
    making progress."""

    start_method: str = attrs.field(default="auto", validator=attrs.validators.in_(START_METHODS))
    """How each incarnation starts (design §3.17): ``auto`` (the default), ``zygote``
    where it can be used (an ``entry`` helper on this host, on Linux x86-64 or AArch64),
    else ``spawn``; ``spawn``, a fresh interpreter each time; ``zygote``, forked from a
    fork server that has imported the entry's module (no interpreter start; a crash's
    restart is a fork too). ``zygote`` with ``argv`` or a ``host`` is an error; where
    the platform has no fork-like clone, or the entry's module starts a thread at import
    (numpy's OpenBLAS does unless ``OPENBLAS_NUM_THREADS=1``), the pool spawns instead
    (a ``zygote_unavailable`` event)."""

    def __attrs_post_init__(self) -> None:
        if (self.entry is None) == (self.argv is None):
            raise ValueError("give exactly one of entry and argv")
        if self.argv is not None and not self.argv:
            raise ValueError("argv must not be empty")
        if self.start_method == "zygote" and (self.argv is not None or self.host is not None):
            raise ValueError("start_method 'zygote' needs an entry helper on this host")
        if self.host is None and (self.port, self.identity, self.ssh_options) != (None, None, ()):
            raise ValueError("port, identity and ssh_options need a host")

    def command(self, bootstrap: str = BOOTSTRAP) -> list[str]:
        """The child's argv: ``argv`` as given, or ``bootstrap`` (by default
        ``BOOTSTRAP``) for ``entry``."""
        if self.argv is not None:
            return list(self.argv)
        assert self.entry is not None
        paths = _parent_path() if self.inherit_path else []
        return [
            self.python,
            "-c",
            bootstrap,
            self.entry,
            _ACTORS_DIR,
            _PROTOCOL_DIR,
            str(len(paths)),
            *paths,
        ]


def _parent_path() -> list[str]:
    """The parent's ``sys.path`` now, each entry absolute ("" is the working directory)."""
    cwd = os.getcwd()
    paths: list[str] = []
    for entry in sys.path:
        if isinstance(entry, str):
            path = os.path.normpath(os.path.join(cwd, entry))
            if path not in paths:
                paths.append(path)
    return paths


@attrs.frozen(kw_only=True)
class HelperSnapshot:
    """A helper incarnation's liveness, taken without waiting (design §3.8)."""

    name: str
    """The spec's name and the incarnation, e.g. ``"helper#0.3"``."""
    incarnation: int
    """1 for the first process of its slot, +1 for each replacement (design §3.7)."""
    pid: int | None
    """The process id, or None if no process was started."""
    state: str
    """A :class:`~actors._core._lifecycle.HelperState` value, e.g. ``"busy"``."""
    alive: bool
    """True until the process is reaped."""
    active_generation: int | None
    """Generation of the job in progress, or None."""
    active_operation: str | None
    """Operation of the job in progress, or None."""
    unreaped: bool
    """Signalled (SIGTERM/SIGKILL) or exiting but not reaped yet."""
    quarantined: bool
    """Not reaped within the kill timeout (design §3.5 step 4)."""
    exit_code: int | None
    """``Popen.returncode`` once reaped (negative: killed by that signal)."""
    jobs_run: int
    """Jobs sent to this incarnation."""
    ready: Any
    """The *ready* frame's payload: ``pid``, ``handlers``, ``heavy_modules`` and
    ``info`` (what the entry's ``on_startup`` returned, e.g. the database it opened)."""
