"""What the Observer shows: the supervision tree and the helpers as they live (§1.7).

:class:`Lifecycle` is fed the same events as the metrics (the supervisors' decisions and
the helper pool's steps, never ``job_started``) and keeps, in bounded memory:

* each supervised child's state, incarnation and the times of its recent restarts;
* which child is itself a supervisor, and which: learnt from its ``child_started``
  event (its ref is a supervisor's), so :meth:`Lifecycle.view` lists each supervisor
  under its parent, whatever the names;
* each helper slot's last exit, forgotten when a pool is opened again (a restarted pool
  actor's fresh slots count incarnations from 1, so an old pool's exit is not theirs);
* a timeline of the last ``timeline`` lifecycle events;
* a change counter that :meth:`Lifecycle.wait_changed` waits on, so a page is told of a
  change as it happens instead of polling.

:meth:`Lifecycle.view` adds what is read at that moment (helper snapshots, mailbox
statistics) and returns JSON-compatible data. Needs no third-party package.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from .._core import ActorRef

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._core import SupervisorEvent
    from .._helpers import HelperPool, PoolEvent

__all__ = ["Lifecycle"]

#: Pool event kinds shown on the timeline (the others are a job's small steps).
_TIMELINE_POOL = frozenset({
    "spawned", "ready", "startup_failed", "sigkill_sent", "reaped", "quarantined",
    "released", "escaped", "intensity_exceeded", "pool_restarted", "restart_scheduled",
    "restart_failed", "grace_expired",
})  # fmt: skip


class Lifecycle:
    """The live state behind the Observer page; see the module docstring.

    Args:
        timeline: Events kept on the timeline (the oldest go first).
        window: Seconds (trio clock) over which restarts are counted per child.
        strategies: Each supervisor's strategy by name (``one_for_one``, ...).
    """

    def __init__(
        self,
        *,
        timeline: int = 200,
        window: float = 60.0,
        strategies: Mapping[str, str] | None = None,
    ) -> None:
        self.timeline: deque[dict[str, Any]] = deque(maxlen=timeline)
        self.window = window
        self.strategies = dict(strategies or {})
        self.changes = 0
        """Lifecycle events seen so far (the version :meth:`wait_changed` compares)."""
        self._changed = trio.Event()
        self._children: dict[tuple[str, str], dict[str, Any]] = {}
        self._restarts: dict[tuple[str, str], deque[float]] = {}
        # (supervisor, child id) -> the name of the supervisor that child runs.
        self._supervises: dict[tuple[str, str], str] = {}
        self._exits: dict[int, dict[str, Any]] = {}
        self._jobs: dict[int, tuple[int | None, float]] = {}

    def _changed_now(self, entry: dict[str, Any]) -> None:
        self.timeline.append(entry)
        self.changes += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self, seen: int) -> int:
        """Wait until more than ``seen`` events were seen; return the new count.

        Returns at once if that is so already; always a checkpoint. The caller bounds
        the wait with its own cancel scope.
        """
        await trio.lowlevel.checkpoint()
        while self.changes <= seen:
            await self._changed.wait()
        return self.changes

    def on_supervisor_event(self, event: SupervisorEvent) -> None:
        """Note one decision of a supervisor."""
        key = (event.supervisor, event.child)
        child = self._children.setdefault(
            key, {"supervisor": event.supervisor, "child": event.child}
        )
        child["incarnation"] = event.incarnation
        now = trio.current_time()
        if event.kind == "child_started":
            child["state"] = "running"
            # A supervisor's ref is not an ActorRef (the supervisor's own test for its
            # child's type): the child is the supervisor of that name, nested under it.
            if event.ref is None or isinstance(event.ref, ActorRef):
                self._supervises.pop(key, None)
                child.pop("supervises", None)
            else:
                self._supervises[key] = child["supervises"] = event.ref.name
        elif event.kind in ("child_exited", "child_stopped"):
            child["state"] = "exited"
            child["last_exit"] = getattr(event, "reason", None)
        elif event.kind == "child_restarting":
            child["state"] = "restarting"
            self._restarts.setdefault(key, deque(maxlen=1000)).append(now)
        elif event.kind == "intensity_exceeded":
            child["state"] = "escalated"
            child["escalated"] = True
        self._changed_now(
            {"time": now, "source": "supervisor", "kind": event.kind,
             "who": f"{event.supervisor}/{event.child}", "incarnation": event.incarnation}
        )  # fmt: skip

    def on_pool_event(self, event: PoolEvent) -> None:
        """Note one step of the helper pool (only lifecycle steps reach the timeline).

        A pool opened again (``pool_restarted`` with ``opened``: its actor restarted)
        has fresh slots whose incarnations count from 1: the slots' last exits and
        job ages, the old pool's, are forgotten. A pool restarted in place
        (``pool_restarted`` with ``epoch``, design §3.7) keeps its slots, whose
        incarnations go on counting: their last exits stay (design §7.8).
        """
        if event.kind == "pool_restarted" and "opened" in event.details:
            self._exits.clear()
            self._jobs.clear()
        if event.kind == "reaped" and event.slot is not None:
            self._exits[event.slot] = {
                "incarnation": event.incarnation,
                "exit_code": event.details.get("exit_code"),
                "signal": event.details.get("signal"),
                "time": event.time,
            }
        if event.kind in _TIMELINE_POOL:
            self._changed_now(
                {"time": event.time, "source": "pool", "kind": event.kind,
                 "who": event.helper or event.pool, "incarnation": event.incarnation}
            )  # fmt: skip

    def view(self, *, pool: HelperPool | None, mailboxes: Mapping[str, ActorRef]) -> dict[str, Any]:
        """The Observer's data now: tree, helpers, mailboxes, timeline (JSON-compatible).

        ``tree`` lists each supervisor (``name``, ``strategy``, ``children``) after its
        parent, depth first: ``parent`` is ``{"supervisor": ..., "child": ...}``, the
        entry of the child that runs it, or None for a root (a supervisor whose parent
        has not reported it started yet is a root until it does). A child that is a
        supervisor names it in ``supervises``.
        """
        now = trio.current_time()
        supervisors: dict[str, list[dict[str, Any]]] = {}
        for key, child in self._children.items():
            times = self._restarts.get(key, ())
            recent = sum(1 for time in times if time > now - self.window)
            supervisors.setdefault(key[0], []).append({**child, "restarts": recent})
        tree: list[dict[str, Any]] = []
        placed: set[str] = set()

        def place(name: str, parent: dict[str, str] | None) -> None:
            placed.add(name)
            children = supervisors[name]
            strategy = self.strategies.get(name, "")
            tree.append({"name": name, "strategy": strategy, "parent": parent,
                         "children": children})  # fmt: skip
            for child in children:
                nested = self._supervises.get((name, child["child"]))
                if nested in supervisors and nested not in placed:
                    place(nested, {"supervisor": name, "child": child["child"]})

        has_parent = {nested for key, nested in self._supervises.items() if key[0] in supervisors}
        # Roots first; then any supervisor no root reaches (a cycle of names), as a root.
        for name in [*(n for n in supervisors if n not in has_parent), *supervisors]:
            if name not in placed:
                place(name, None)
        return {
            "now": now,
            "changes": self.changes,
            "window": self.window,
            "tree": tree,
            "helpers": [] if pool is None else self._helpers(pool, now),
            "mailboxes": [
                {"actor": name, "depth": stats.queued, "capacity": stats.capacity}
                for name, ref in mailboxes.items()
                for stats in (ref.statistics(),)
            ],
            "timeline": list(self.timeline),
        }

    def _helpers(self, pool: HelperPool, now: float) -> list[dict[str, Any]]:
        rows = []
        for slot, helper in enumerate(pool.snapshot().helpers):
            row: dict[str, Any] = {"slot": slot, "last_exit": self._exits.get(slot)}
            if helper is None:
                rows.append({**row, "state": "down"})
                continue
            job = helper.active_generation
            seen = self._jobs.get(slot)
            if job is None:
                self._jobs.pop(slot, None)
            elif seen is None or seen[0] != job:
                self._jobs[slot] = seen = (job, now)
            rows.append({
                **row, "pid": helper.pid, "incarnation": helper.incarnation,
                "state": "quarantined" if helper.quarantined else helper.state,
                "job": None if job is None else helper.active_operation,
                # Seen since: the job path emits no event for this (design §3.10).
                "job_age": None if job is None or seen is None else now - seen[1],
            })  # fmt: skip
        return rows
