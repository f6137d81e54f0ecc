"""The fork server (zygote) of a pool's helpers, child side (design §3.17).

Runs in the zygote process, which the child bootstrap started with the helper's entry
module already imported. :func:`serve_forks` answers fork requests on a Unix socket
until the pool closes it; in each forked helper it *returns*, and the bootstrap then
calls the entry's function exactly as in a spawned helper.

Stdlib only, like every module of this room, and never ``json`` or ``re``: what the
zygote imports, every helper it forks holds.

Wire (``SOCK_SEQPACKET``, one message per datagram):

* zygote → pool, once: ``ready <pid>``, or ``refused <reason>`` (then it exits);
* pool → zygote: ``fork\\0<cwd>\\0<NAME=value>...`` with four file descriptors
  (``SCM_RIGHTS``): the helper's stdin, stdout and stderr, and a *go* pipe the helper
  waits on before it runs any code of the entry (the pool writes to it once the helper
  is in its containment, as a spawned helper is before its interpreter runs), and in
  ``cgroup`` containment a fifth, the directory of the helper's cgroup;
* zygote → pool: ``forked <pid> <1 if born in that cgroup, else 0>``, or
  ``failed 0 <reason>`` (no process was made).
* End of input: the pool is gone or closing; the zygote exits 0.

Why ``clone(CLONE_PARENT)`` and not ``fork()``: the helper must be the **pool's** child,
as a spawned one is, so that the pool reaps it itself (``waitpid``: its exact exit
status, no zombie left behind by anyone else), its pid cannot be reused while the pool
signals it (a child's pid stays taken until its parent reaps it), and a zygote that dies
takes nothing with it. The clone is the same system call ``fork()`` makes, with the
parent's parent as the new process's parent; CPython's own before/after-fork steps run
around it (``PyOS_BeforeFork``/``PyOS_AfterFork_*``: the import lock, the
``os.register_at_fork`` hooks, which reseed :mod:`random`). C libraries' own
``pthread_atfork`` handlers do not run: a zygote holds imported modules only (see
design §3.17 for what it may hold).
"""

from __future__ import annotations

import errno
import gc
import os
import socket
import sys

__all__ = ["CLONE_SYSCALLS", "serve_forks"]

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final

#: The ``clone`` system call number per machine, where its first argument is the flags
#: and the others may all be 0 (a fork-like clone on the caller's stack copy).
CLONE_SYSCALLS: Final = {"x86_64": 56, "aarch64": 220}
_CLONE_PARENT: Final = 0x00008000
_CLONE_INTO_CGROUP: Final = 0x200000000
_CLONE3: Final = 435  # the same number on every architecture (since Linux 5.3)
_SIGCHLD: Final = 17
_MAX_REQUEST: Final = 1 << 20


def _threads() -> int:
    """How many threads this process has (a fork copies only the calling one)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _cloner() -> Callable[[int | None], tuple[int, bool]]:
    """A function that clones this process as a sibling (``CLONE_PARENT``), into the
    cgroup whose directory descriptor it is given if it can (``clone3`` with
    ``CLONE_INTO_CGROUP``, Linux 5.7): born there, the helper never has to be moved, a
    move that costs the pool several milliseconds (the kernel synchronises RCU for
    it). It returns ``(pid, born_inside)``; pid 0 in the new process."""
    import ctypes

    number = CLONE_SYSCALLS[os.uname().machine]
    # PyDLL: the GIL stays held across the call, as os.fork() holds it.
    syscall = ctypes.PyDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    api = ctypes.pythonapi
    flags = ctypes.c_ulong(_CLONE_PARENT | _SIGCHLD)
    call = ctypes.c_long(number)
    # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack,
    # stack_size, tls, set_tid, set_tid_size, cgroup (all u64).
    args = (ctypes.c_uint64 * 11)()
    size = ctypes.c_size_t(ctypes.sizeof(args))
    clone3 = [True]

    def clone(cgroup: int | None) -> tuple[int, bool]:
        inside = cgroup is not None and clone3[0]
        if cgroup is not None and inside:
            ctypes.memset(args, 0, ctypes.sizeof(args))
            args[0] = _CLONE_PARENT | _CLONE_INTO_CGROUP
            args[10] = cgroup  # exit_signal stays 0: CLONE_PARENT takes the caller's
        api.PyOS_BeforeFork()
        if inside:
            pid = int(syscall(ctypes.c_long(_CLONE3), ctypes.byref(args), size))
        else:
            pid = int(syscall(call, flags, None, None, None, None))
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0, inside
        error = ctypes.get_errno()
        api.PyOS_AfterFork_Parent()
        if pid < 0 and inside and error in (errno.ENOSYS, errno.E2BIG, errno.EINVAL):
            clone3[0] = False  # an older kernel: clone, and the pool moves the helper
            return clone(cgroup)
        if pid < 0:
            raise OSError(error, os.strerror(error))
        return pid, inside

    return clone


def serve_forks(fd: int) -> None:
    """Serve fork requests on the socket ``fd``; return only in a forked helper.

    Args:
        fd: The zygote's end of the pool's ``SOCK_SEQPACKET`` socket pair.

    In the pool process it never returns: it exits 0 at the end of input (the pool
    closed its end or died), or 3 after a ``refused`` answer.
    """
    # A forked helper's modules are those of a spawned one: this module leaves
    # sys.modules (the running function keeps it alive).
    sys.modules.pop(__name__, None)
    control = socket.socket(fileno=fd)
    if _threads() > 1:
        control.send(b"refused the entry module started threads at import")
        os._exit(3)
    try:
        clone = _cloner()
    except (KeyError, OSError, AttributeError) as exc:
        control.send(f"refused no fork-like clone here: {exc!r}".encode())
        os._exit(3)
    # Objects made so far (the modules) are never collected: a forked helper's
    # collections do not touch (and copy) their pages.
    gc.freeze()
    control.send(b"ready %d" % os.getpid())
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 5)
        except OSError:
            message, fds = b"", []
        if not message:
            os._exit(0)
        if _fork(control, clone, message, fds):
            return


def _fork(
    control: socket.socket,
    clone: Callable[[int | None], tuple[int, bool]],
    message: bytes,
    fds: list[int],
) -> bool:
    """Answer one request; True in the forked helper."""
    fields = message.split(b"\0")
    if fields[0] != b"fork" or len(fds) not in (4, 5) or len(fields) < 2:
        for fd in fds:
            os.close(fd)
        control.send(b"failed 0 malformed fork request")
        return False
    if _threads() > 1:
        for fd in fds:
            os.close(fd)
        control.send(b"failed 0 the zygote has more than one thread")
        return False
    # Nothing buffered may be written twice (by the zygote and by the helper).
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    cgroup = fds.pop() if len(fds) == 5 else None
    try:
        pid, inside = clone(cgroup)
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        control.send(f"failed 0 clone: {exc}".encode())
        return False
    finally:
        if cgroup is not None:
            os.close(cgroup)  # in both processes
    if pid == 0:
        _become_helper(control, fields, fds)
        return True
    for fd in fds:
        os.close(fd)
    # At once, not after the helper's set-up: one hop less per start. The helper waits
    # for its *go* anyway, and the pool finds and signals it by its pid (design §3.11)
    # even before its ``setsid()``; a set-up that fails exits 127 with the reason on its
    # stderr, which the pool reports as an exit during startup.
    control.send(b"forked %d %d" % (pid, inside))
    return False


def _become_helper(control: socket.socket, fields: list[bytes], fds: list[int]) -> None:
    """In the new process: its own session, its descriptors, environment and directory."""
    try:
        control.close()
        os.setsid()
        *stdio, go = fds
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)  # inheritable, as a spawned helper's 0-2 are
        for fd in stdio:
            if fd > 2:
                os.close(fd)
        os.chdir(os.fsdecode(fields[1]))
        for item in fields[2:]:
            name, _, value = item.partition(b"=")
            os.environ[os.fsdecode(name)] = os.fsdecode(value)
            _stamp(name, value)
    except BaseException as exc:  # to its stderr (the pool's pipe, if dup2 got there)
        os.write(2, f"actors.helper: the forked helper's set-up failed: {exc!r}\n".encode())
        os._exit(127)
    # Contained now? Wait for the pool's word (end of file too: it is gone, and the
    # helper then finds its input closed).
    os.read(go, 1)
    os.close(go)


def _stamp(name: bytes, value: bytes) -> None:
    """Write ``value`` over ``name``'s placeholder in this process's initial environment.

    ``/proc/PID/environ`` shows a process's initial environment block, not what
    ``os.environ`` (``putenv``) changed since: so the zygote starts with a placeholder of
    the value's length for each variable the containment reads there (its tree's tag),
    and each helper overwrites it in place, in its own copy of the memory. Its
    descendants, forked or executed, then carry their helper's tag as a spawned
    helper's do (design §3.11).
    """
    try:
        with open("/proc/self/stat", "rb") as file:
            stat = file.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (stat 50, 51)
    except (OSError, ValueError, IndexError):
        return
    import ctypes

    block = ctypes.string_at(start, end - start)
    at = (b"\0" + block).find(b"\0" + name + b"=")
    if at < 0:
        return
    at += len(name) + 1
    stop = block.find(b"\0", at)
    if stop - at == len(value):
        ctypes.memmove(start + at, value, len(value))
