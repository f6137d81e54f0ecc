"""The Actor base class: lifecycle, stop(grace), crashes, nursery (design §1.1-§1.3)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors import Actor, ActorCrashed, ActorRef, ActorState, ActorStopped, Reply


class Recorder(Actor):
    """Logs (time, what) for hooks and messages; message kinds drive behaviour."""

    def __init__(self, log: list[tuple[float, str]] | None = None) -> None:
        self.log: list[tuple[float, str]] = [] if log is None else log
        self.states: dict[str, ActorState] = {}

    def note(self, what: str) -> None:
        self.log.append((trio.current_time(), what))

    async def on_start(self) -> None:
        self.states["on_start"] = self.state
        self.note("on_start")

    async def handle(self, message: Any, reply: Reply) -> None:
        kind, arg = message if isinstance(message, tuple) else (message, None)
        self.note(f"handle {kind}")
        if kind == "sleep":
            await trio.sleep(arg)
            self.note(f"slept {arg}")
            reply.send(arg)
        elif kind == "crash":
            raise ValueError("boom")
        elif kind == "task":
            # answer later, from a per-message task in the actor's nursery
            self.nursery.start_soon(self._answer_later, arg, reply)
        else:
            reply.send(kind)

    async def _answer_later(self, delay: float, reply: Reply) -> None:
        await trio.sleep(delay)
        self.note(f"task done {delay}")
        reply.send(delay)

    async def on_stop(self) -> None:
        self.states["on_stop"] = self.state
        self.note("on_stop")


async def test_lifecycle_states_and_hooks(nursery: trio.Nursery) -> None:
    actor = Recorder()
    assert actor.state is ActorState.STARTING
    with pytest.raises(RuntimeError, match="not running"):
        _ = actor.nursery
    with pytest.raises(RuntimeError, match="not been started"):
        _ = actor.ref
    ref: ActorRef = await nursery.start(actor.run)
    assert ref.state is ActorState.RUNNING
    assert actor.states["on_start"] is ActorState.STARTING
    await ref.stop()
    assert actor.states["on_stop"] is ActorState.STOPPING
    assert ref.state is ActorState.STOPPED
    assert [what for _, what in actor.log] == ["on_start", "on_stop"]
    with pytest.raises(RuntimeError, match="already ran"):
        await actor.run()


async def test_messages_are_handled_in_order_one_at_a_time(nursery: trio.Nursery) -> None:
    class Order(Actor):
        mailbox_capacity = 8

        def __init__(self) -> None:
            self.got: list[int] = []
            self.busy = False

        async def handle(self, message: Any, reply: Reply) -> None:
            assert not self.busy
            self.busy = True
            await trio.lowlevel.checkpoint()
            self.got.append(message)
            self.busy = False

    actor = Order()
    ref: ActorRef = await nursery.start(actor.run)
    async with trio.open_nursery() as senders:
        for i in range(50):
            senders.start_soon(ref.send, i)
            await trio.testing.wait_all_tasks_blocked()
    await ref.stop()
    assert actor.got == list(range(50))


async def test_stop_drains_queue_within_grace(autojump_clock: trio.testing.MockClock) -> None:
    actor = Recorder()
    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(actor.run)
        await ref.send(("sleep", 1.0))
        await ref.send(("sleep", 1.0))
        await ref.stop(grace=5.0)
        assert trio.current_time() == 2.0
    assert ref.state is ActorState.STOPPED
    assert [w for _, w in actor.log].count("slept 1.0") == 2


async def test_stop_cancels_at_exact_grace_and_fails_pending_asks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = Recorder()
    outcomes: list[tuple[str, float]] = []

    async def ask(message: Any) -> None:
        try:
            await ref.ask(message, timeout=100)
            outcomes.append(("answered", trio.current_time()))
        except ActorStopped:
            outcomes.append(("stopped", trio.current_time()))

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        nursery.start_soon(ask, ("sleep", 10.0))  # in progress when the grace ends
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, ("sleep", 10.0))  # still queued when the grace ends
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=1.5)
        assert trio.current_time() == 1.5
    assert outcomes == [("stopped", 1.5), ("stopped", 1.5)]
    assert (1.5, "on_stop") in actor.log


async def test_stop_grace_zero_cancels_at_once(autojump_clock: trio.testing.MockClock) -> None:
    actor = Recorder()
    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(actor.run)
        await ref.send(("sleep", 3.0))
        await trio.testing.wait_all_tasks_blocked()
        await ref.stop(grace=0)
    assert trio.current_time() == 0.0
    assert "slept 3.0" not in [w for _, w in actor.log]


async def test_concurrent_stops_share_the_earliest_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = Recorder()
    returned: list[tuple[float, float]] = []

    async def stop(grace: float) -> None:
        await ref.stop(grace)
        returned.append((grace, trio.current_time()))

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        await ref.send(("sleep", 10.0))
        nursery.start_soon(stop, 4.0)
        nursery.start_soon(stop, 2.0)
    assert sorted(returned) == [(2.0, 2.0), (4.0, 2.0)]
    with trio.testing.assert_checkpoints():
        await ref.stop(1.0)  # idempotent once stopped
    assert trio.current_time() == 2.0


async def test_stop_nowait_from_inside_the_handler(autojump_clock: trio.testing.MockClock) -> None:
    class Quitter(Actor):
        async def handle(self, message: Any, reply: Reply) -> None:
            self.ref.stop_nowait(grace=1.0)
            reply.send("bye")

    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(Quitter().run)
        assert await ref.ask("quit", timeout=1) == "bye"
        await ref.wait_stopped()
    assert trio.current_time() == 0.0
    assert ref.state is ActorState.STOPPED


async def test_crash_fails_asker_and_propagates_bare_to_parent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = Recorder()
    errors: list[BaseException] = []
    queued: list[BaseException] = []

    async def queued_ask() -> None:
        try:
            await ref.ask("echo", timeout=10)
        except ActorStopped as exc:
            queued.append(exc)

    async def crashing_ask() -> None:
        try:
            await ref.ask("crash", timeout=10)
        except ActorCrashed as exc:
            errors.append(exc)

    with pytest.RaisesGroup(ValueError):
        async with trio.open_nursery() as nursery:
            ref = await nursery.start(actor.run)
            await ref.send(("sleep", 1.0))
            nursery.start_soon(crashing_ask)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(queued_ask)
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(5)  # never finishes: the crash cancels the nursery
    assert trio.current_time() == 1.0
    assert ref.state is ActorState.FAILED
    (crash,) = errors
    assert crash.code == "actor_crashed"
    assert crash.details == {"actor": "Recorder", "error_type": "ValueError"}
    assert "ValueError: boom" in str(crash)
    assert [e.code for e in queued] == ["actor_stopped"]
    assert [w for _, w in actor.log][-1] == "on_stop"  # cleanup still ran
    with pytest.raises(ActorStopped):
        ref.try_send("late")


async def test_on_start_failure_fails_nursery_start() -> None:
    class BadStart(Actor):
        async def on_start(self) -> None:
            raise OSError("no port")

        async def on_stop(self) -> None:  # pragma: no cover - must not run
            raise AssertionError("on_stop after a failed on_start")

    actor = BadStart()
    async with trio.open_nursery() as nursery:
        with pytest.raises(OSError, match="no port"):
            await nursery.start(actor.run)
    assert actor.state is ActorState.FAILED


async def test_outside_cancellation_stops_cleanly(autojump_clock: trio.testing.MockClock) -> None:
    actor = Recorder()
    stopped: list[float] = []

    async def asker(ref: ActorRef) -> None:
        try:
            await ref.ask(("sleep", 50.0), timeout=100)
        except ActorStopped:
            stopped.append(trio.current_time())

    async with trio.open_nursery() as outer:
        with trio.move_on_after(3):
            async with trio.open_nursery() as nursery:
                ref = await nursery.start(actor.run)
                outer.start_soon(asker, ref)  # outlives the actor's nursery
                await trio.sleep(10)
    assert ref.state is ActorState.STOPPED
    assert stopped == [3.0]


async def test_nursery_tasks_wait_for_stop_then_are_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actor = Recorder()
    results: list[tuple[Any, float]] = []

    async def ask(delay: float) -> None:
        try:
            results.append((await ref.ask(("task", delay), timeout=100), trio.current_time()))
        except ActorStopped as exc:
            results.append((exc.code, trio.current_time()))

    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        nursery.start_soon(ask, 1.0)
        nursery.start_soon(ask, 9.0)
        await trio.testing.wait_all_tasks_blocked()
        # Both handled at once: the handler only spawns tasks.
        assert ref.statistics().queued == 0
        await ref.stop(grace=4.0)
        assert trio.current_time() == 4.0
    assert sorted(results, key=lambda r: r[1]) == [(1.0, 1.0), ("actor_stopped", 4.0)]


async def test_on_stop_is_bounded(autojump_clock: trio.testing.MockClock) -> None:
    class SlowStop(Actor):
        on_stop_timeout = 2.0

        async def handle(self, message: Any, reply: Reply) -> None:
            reply.send(message)

        async def on_stop(self) -> None:
            await trio.sleep(100)

    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(SlowStop().run)
        await ref.stop(grace=1.0)
    assert trio.current_time() == 2.0
    assert ref.state is ActorState.STOPPED


async def test_config_is_validated_at_run() -> None:
    actor = Recorder()
    actor.mailbox_capacity = -1
    with pytest.raises(ValueError, match=r"^mailbox_capacity must"):
        await actor.run()
    other = Recorder()
    other.on_stop_timeout = float("nan")
    with pytest.raises(ValueError, match=r"^on_stop_timeout must be finite"):
        await other.run()


async def test_names_and_per_instance_capacity(nursery: trio.Nursery) -> None:
    class Named(Recorder):
        name = "custom"

    actor = Recorder()
    actor.mailbox_capacity = 3
    ref: ActorRef = await nursery.start(actor.run)
    assert (ref.name, ref.statistics().capacity) == ("Recorder", 3)
    assert actor.statistics().capacity == 3
    named: ActorRef = await nursery.start(Named().run)
    assert named.name == "custom"
    assert Actor.name == "Actor"
    assert repr(actor) == "<Recorder 'Recorder' running>"


async def test_default_handle_crashes() -> None:
    with pytest.RaisesGroup(NotImplementedError):
        async with trio.open_nursery() as nursery:
            ref: ActorRef = await nursery.start(Actor().run)
            with pytest.raises(ActorCrashed, match="NotImplementedError"):
                await ref.ask("x", timeout=1)
            await trio.sleep_forever()  # the crash cancels us


async def test_on_drained_lets_background_tasks_end_before_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Ticker(Actor):
        def __init__(self) -> None:
            self.quit = trio.Event()
            self.ticks = 0
            self.drained_at: float | None = None

        async def on_start(self) -> None:
            self.nursery.start_soon(self._tick)

        async def _tick(self) -> None:
            while not self.quit.is_set():
                with trio.move_on_after(1.0):
                    await self.quit.wait()
                self.ticks += 1

        async def handle(self, message: Any, reply: Reply) -> None:
            await trio.sleep(2.5)

        async def on_drained(self) -> None:
            self.drained_at = trio.current_time()
            self.quit.set()

    actor = Ticker()
    async with trio.open_nursery() as nursery:
        ref: ActorRef = await nursery.start(actor.run)
        await ref.send("work")
        await ref.stop(grace=60.0)
    assert actor.drained_at == 2.5
    assert trio.current_time() == 2.5  # not 60: the ticker ended when told
    assert actor.ticks == 3
    assert ref.state is ActorState.STOPPED
