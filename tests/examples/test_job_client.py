"""The job client: its retries of refused submits and what it shows a person (design §6.16).

The retry function runs on a virtual clock with seeded randomness (exact times,
contributing §F.2); one test drives it over real websockets against a busy front door
(real clock, short timeouts, contributing §F.3).
"""

from __future__ import annotations

import argparse
import bisect
import io
import itertools
import random
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from frontdoor_support import TIMEOUT, assert_no_children, open_client, sockets_to
from trio_websocket import ConnectionClosed

from actors import EventLogActor, EventLogClient, EventLogConfig, OperationSpec
from examples.jobs.client import _parser, _resume, _submit
from examples.jobs.follow import READ_RETRY, Output, Session, read, verdict_name, waiting
from examples.jobs.retry import SubmitRetryPolicy, retry_hint, submit_with_retry
from examples.web.closing import GOING_AWAY
from examples.web.frontdoor import FrontDoorConfig, open_front_door

if TYPE_CHECKING:
    from actors import RunStatus

SUBMITTERS = 200
WINDOW = 0.010  # seconds: no window this long may hold more than a fifth of the retries


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


def _refusal(retry_after: float | None) -> dict[str, Any]:
    return {
        "type": "receipt", "admitted": False, "retryable": True, "code": "admission_full",
        "run_id": None, "retry_after": retry_after, "depth": 8, "bound": 8,
    }  # fmt: skip


def _busiest_window(times: list[float]) -> int:
    """The most of ``times`` within any WINDOW seconds."""
    ordered = sorted(times)
    return max(bisect.bisect_left(ordered, t + WINDOW) - i for i, t in enumerate(ordered))


@pytest.mark.parametrize("hint", [0.05, 0.5, 5.0])
async def test_200_refused_submitters_never_retry_early_and_spread_out(
    autojump_clock: trio.testing.MockClock, hint: float
) -> None:
    # A burst: every submitter is refused at the same instant, three times over, each
    # time with the server's hint; then admitted.
    policy = SubmitRetryPolicy()
    attempts: list[list[float]] = [[] for _ in range(SUBMITTERS)]
    refusals = 3

    async def submitter(index: int) -> None:
        times = attempts[index]

        async def attempt() -> dict[str, Any]:
            times.append(trio.current_time())
            if len(times) <= refusals:
                return _refusal(hint)
            return {"type": "receipt", "admitted": True, "run_id": index}

        answer = await submit_with_retry(attempt, policy=policy, rng=random.Random(index))
        assert answer["admitted"] is True

    async with trio.open_nursery() as nursery:
        for index in range(SUBMITTERS):
            nursery.start_soon(submitter, index)
    for times in attempts:
        assert times[0] == 0.0
        assert len(times) == refusals + 1
        waits = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert min(waits) >= hint  # never before the hint (virtual time: exact)
    for retry in range(1, refusals + 1):
        wave = [times[retry] for times in attempts]
        assert _busiest_window(wave) <= SUBMITTERS // 5, (retry, _busiest_window(wave))
    assert _busiest_window([t for times in attempts for t in times[1:]]) <= SUBMITTERS // 5


async def test_the_hint_is_capped_and_a_refusal_that_stands_is_the_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = SubmitRetryPolicy(base=0.1, cap=1.0, max_hint=2.0, give_up_after=10.0)
    times: list[float] = []
    waits: list[tuple[int, float]] = []

    async def attempt() -> dict[str, Any]:
        times.append(trio.current_time())
        return _refusal(3600.0)  # a server asking for an hour is read as max_hint

    answer = await submit_with_retry(
        attempt, policy=policy, rng=random.Random(1),
        on_wait=lambda retry, delay, refusal: waits.append((retry, delay)),
    )  # fmt: skip
    assert answer == _refusal(3600.0)  # given up: the last refusal is the answer
    assert [retry for retry, _ in waits] == list(range(1, len(times)))
    for (_, delay), earlier, later in zip(waits, times, times[1:], strict=False):
        assert 2.0 <= delay <= 3.0  # max_hint plus at most cap
        assert later - earlier == pytest.approx(delay)
    assert times[-1] <= 10.0 < times[-1] + 3.0


def test_which_answers_are_retried() -> None:
    assert retry_hint(_refusal(0.25)) == 0.25
    assert retry_hint(_refusal(None)) == 0.0  # retryable, but no hint: jitter only
    error = {"type": "error", "code": "ledger_unavailable", "retryable": True, "retry_after": 1}
    assert retry_hint(error) == 1.0
    assert retry_hint({**error, "code": "server_shutting_down"}) is None
    assert retry_hint({**error, "retryable": False}) is None
    assert retry_hint({"type": "receipt", "admitted": True}) is None
    assert retry_hint({**_refusal(1.0), "retryable": False}) is None


# -- over real websockets -----------------------------------------------------------------


async def _quick(run: RunStatus, report: Any) -> str:
    await trio.sleep(0.02)
    return "done"


async def test_refused_submitters_over_real_websockets_wait_for_the_hint() -> None:
    submitters, hint = 24, 0.2
    log_config = EventLogConfig(max_inflight=2, retry_after_min=hint, retry_after_max=hint)
    actor = EventLogActor(
        log_config, operations=[OperationSpec(name="quick", fields={"n"})],
        runners={"quick": _quick},
    )  # fmt: skip
    policy = SubmitRetryPolicy(base=0.05, cap=0.5, give_up_after=30.0)
    refused: list[tuple[float, float, float]] = []  # (refused at, hint, next attempt at)
    admitted: list[int] = []
    config = FrontDoorConfig(max_per_address=submitters, max_connections=submitters)
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(actor.run)
        log = EventLogClient(ref, timeout=5.0)
        async with open_front_door(log, config) as front:

            async def submitter(index: int) -> None:
                async with open_client(front.port, prefix=f"c{index}-") as client:
                    session = Session(client.ws, prefix=f"c{index}")
                    last: list[tuple[float, float]] = []

                    async def attempt() -> dict[str, Any]:
                        now = trio.current_time()
                        if last:
                            refused.append((*last.pop(), now))
                        answer = await session.request(
                            "submit", request_id=f"c{index}", operation="quick",
                            arguments={"n": index},
                        )  # fmt: skip
                        if retry_hint(answer) is not None:
                            last.append((trio.current_time(), answer["retry_after"]))
                        return answer

                    with trio.fail_after(policy.give_up_after):
                        answer = await submit_with_retry(
                            attempt, policy=policy, rng=random.Random(index)
                        )
                    assert answer["admitted"] is True, answer
                    admitted.append(answer["run_id"])

            async with trio.open_nursery() as clients:
                for index in range(submitters):
                    clients.start_soon(submitter, index)
        await ref.stop(1.0)
    assert len(set(admitted)) == submitters  # everyone got in, each once
    assert len(refused) >= submitters // 2  # the pool of 2 refused most at first
    for refused_at, told, retried_at in refused:
        assert told == hint
        assert retried_at - refused_at >= told  # never before the hint


# -- for a person -------------------------------------------------------------------------


def test_verdicts_are_one_lowercase_word() -> None:
    assert verdict_name("finished", "ok") == "ok"
    assert verdict_name("finished", "NOT_RUN") == "failed"
    assert verdict_name("finished", None) == "failed"
    assert verdict_name("finished", "Empty") == "empty"
    assert verdict_name("cancelled", None) == "cancelled"
    assert verdict_name("held", None) == "held"


def test_progress_is_one_line_per_tenth_off_a_terminal() -> None:
    out = io.StringIO()
    output = Output(out=out, err=io.StringIO())
    for step in range(101):
        output.progress(3, step / 100, None)
    lines = out.getvalue().splitlines()
    assert lines == [f"run 3: running {tenth * 10:3d}%" for tenth in range(11)]
    quiet = io.StringIO()
    Output(json_lines=True, out=quiet).progress(3, 0.5, "half")
    assert quiet.getvalue() == ""  # --json: the raw messages only


def test_every_subcommand_has_help_and_url_shows_its_default() -> None:
    parser = _parser()
    text = parser.format_help()
    assert "(default ws://127.0.0.1:8766)" in text
    subparsers = next(a for a in parser._actions if a.dest == "command")
    names = set(subparsers.choices)  # type: ignore[attr-defined]
    assert names == {"submit", "status", "cancel", "discard", "resume", "watch", "boot_report"}
    helped = {choice.dest for choice in subparsers._choices_actions}  # type: ignore[attr-defined]
    assert helped == names
    assert all(choice.help for choice in subparsers._choices_actions)  # type: ignore[attr-defined]
    for name, sub in subparsers.choices.items():  # type: ignore[attr-defined]
        for action in sub._actions:
            assert action.help, (name, action.dest)


async def test_the_retry_shows_that_it_waits() -> None:
    err = io.StringIO()
    output = Output(out=io.StringIO(), err=err)
    answers = [_refusal(0.01), {"type": "receipt", "admitted": True, "run_id": 1}]

    async def attempt() -> dict[str, Any]:
        return answers.pop(0)

    with trio.fail_after(TIMEOUT):
        await submit_with_retry(
            attempt, policy=SubmitRetryPolicy(base=0.01, cap=0.02), rng=random.Random(0),
            on_wait=waiting(output),
        )  # fmt: skip
    (line,) = err.getvalue().splitlines()
    assert line.startswith("admission_full: the server is busy (8 of 8 runs); retrying in 0.0")
    assert line.endswith(" s (retry 1)")


async def test_a_read_is_asked_again_while_the_ledger_is_unavailable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A database restarting under a cluster node: its status read is refused, retryably.
    unavailable = {
        "type": "error", "code": "ledger_unavailable", "retryable": True, "retry_after": 0.05,
        "message": "the ledger is unavailable (reading a run): AdminShutdown",
    }  # fmt: skip
    reply = {"type": "status_reply", "run_id": 7, "state": "finished", "verdict": "ok"}
    asked: list[tuple[float, dict[str, Any]]] = []

    class Ledger:
        def __init__(self, answers: list[dict[str, Any]]) -> None:
            self.answers = answers

        async def request(self, type: str, **fields: Any) -> dict[str, Any]:
            asked.append((trio.current_time(), {"type": type, **fields}))
            return self.answers.pop(0)

    err = io.StringIO()
    output = Output(out=io.StringIO(), err=err)
    session: Any = Ledger([unavailable, unavailable, reply])
    assert await read(session, "status", output, run_id=7) == reply
    assert [what for _, what in asked] == [{"type": "status", "run_id": 7}] * 3
    assert all(b - a >= 0.05 for (a, _), (b, _) in itertools.pairwise(asked))
    assert err.getvalue().count("ledger_unavailable: the server cannot use its ledger") == 2
    # A refusal that stands is the answer after READ_RETRY's patience; others at once.
    asked.clear()
    session = Ledger([unavailable] * 10_000)
    began = trio.current_time()
    assert (await read(session, "status", output, run_id=7))["code"] == "ledger_unavailable"
    assert trio.current_time() - began <= READ_RETRY.give_up_after
    unknown = {"type": "error", "code": "unknown_run", "retryable": False}
    session = Ledger([unknown])
    assert await read(session, "status", output, run_id=8) == unknown


# -- resume follows like submit ---------------------------------------------------------------


async def _forever(run: RunStatus, report: Any) -> None:
    await trio.sleep_forever()


async def _counting(run: RunStatus, report: Any) -> int:
    for step in range(1, 5):
        report(step / 4, f"step {step}")
        await trio.sleep(0.01)
    return 4


async def test_resume_follows_the_resumed_run_to_its_verdict(tmp_path) -> None:
    ledger = str(tmp_path / "ledger.db")
    operations = [OperationSpec(name="work")]

    async def event_log(runner: Any, nursery: trio.Nursery) -> EventLogClient:
        actor = EventLogActor(
            EventLogConfig(ledger_path=ledger), operations=operations, runners={"work": runner}
        )
        return EventLogClient(await nursery.start(actor.run), timeout=5.0)

    async with trio.open_nursery() as nursery:  # a run caught running: held next time
        log = await event_log(_forever, nursery)
        receipt = await log.submit("work", {})
        with trio.fail_after(TIMEOUT):
            while (await log.status(receipt.run_id)).state != "running":  # noqa: ASYNC110
                await trio.sleep(0.01)
        await log.ref.stop(1.0)
    async with trio.open_nursery() as nursery:
        log = await event_log(_counting, nursery)
        async with open_front_door(log, FrontDoorConfig()) as front:
            args = argparse.Namespace(
                url=front.url, token=None, run_id=receipt.run_id, override=False
            )
            out = io.StringIO()
            status = await _resume(args, Output(out=out, err=io.StringIO()))
        await log.ref.stop(1.0)
    run = receipt.run_id
    assert status == 0
    assert out.getvalue().splitlines() == [
        f"run {run}: resumed",
        f"run {run}: running",
        *[f"run {run}: running {p:3d}%  step {p // 25}" for p in (25, 50, 75, 100)],
        f"run {run}: ok",
        "result: 4",
    ]


# -- the client's socket ------------------------------------------------------------------


async def test_the_client_closes_its_socket_when_the_server_closes_the_connection() -> None:
    # The server shuts down while the client follows a run: it closes the websocket
    # (1001) and its TCP side. The client's socket must close too, not stay in
    # CLOSE_WAIT for as long as the client lives.
    actor = EventLogActor(
        EventLogConfig(), operations=[OperationSpec(name="work")], runners={"work": _forever}
    )
    ended: list[BaseException] = []
    out = io.StringIO()

    async def follow(url: str) -> None:
        args = argparse.Namespace(
            url=url, token=None, operation="work", arguments={}, give_up_after=5.0
        )
        try:
            await _submit(args, Output(out=out, err=io.StringIO()))
        except* ConnectionClosed as group:
            ended.extend(group.exceptions)  # kept: their tracebacks hold the client's objects

    async with trio.open_nursery() as nursery:
        log = EventLogClient(await nursery.start(actor.run), timeout=5.0)
        async with open_front_door(log, FrontDoorConfig()) as front, trio.open_nursery() as clients:
            port = front.port
            clients.start_soon(follow, front.url)
            with trio.fail_after(TIMEOUT):
                while "run 1: running" not in out.getvalue():  # noqa: ASYNC110 - its output
                    await trio.sleep(0.01)
            assert sockets_to(port) == ["ESTABLISHED"]
            await front.shutdown(grace=0.0)
        await log.ref.stop(1.0)
    assert [exc.reason.code for exc in ended] == [GOING_AWAY]  # type: ignore[attr-defined]
    assert set(sockets_to(port)).isdisjoint({"ESTABLISHED", "CLOSE_WAIT"}), sockets_to(port)


# -- a refused client keeps up while it waits ------------------------------------------------


async def test_a_refused_submit_waits_without_falling_behind_and_follows_its_run() -> None:
    # Another run holds the only place and streams large progress notes while this
    # client waits out admission_full's retry_after. A client that stayed subscribed without
    # reading would fill its socket and send queue and be dropped (4000); this one
    # leaves its subscription while it waits, comes back for its submit, and exits 0.
    go = trio.Event()

    async def chatty(run: RunStatus, report: Any) -> str:
        await go.wait()
        for i in range(1000):  # about 1 MB of events: far past the client's buffers
            report((i + 1) / 1000, "x" * 1000)
            await trio.lowlevel.checkpoint()
        return "said"

    # The flood runs while the client waits (at least the hint): a loaded machine that
    # stretched it into the client's next attempt (0.5 s did) could stall a client that
    # reads past push_timeout, which drops any subscriber, reading or not.
    hint = 2.0
    log_config = EventLogConfig(max_inflight=1, retry_after_min=hint, retry_after_max=hint)
    actor = EventLogActor(
        log_config,
        operations=[OperationSpec(name="chatty"), OperationSpec(name="work")],
        runners={"chatty": chatty, "work": _quick},
    )
    config = FrontDoorConfig(send_queue=1, subscriber_bound=8, push_timeout=0.2,
                             socket_send_buffer=4096)  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    async with trio.open_nursery() as nursery:
        log = EventLogClient(await nursery.start(actor.run), timeout=5.0)
        async with open_front_door(log, config) as front:
            await log.submit("chatty", {}, request_id="holder")
            args = argparse.Namespace(
                url=front.url, token=None, operation="work", arguments={}, give_up_after=30.0
            )

            async def release_when_waiting() -> None:
                with trio.fail_after(TIMEOUT):
                    while "retrying in" not in err.getvalue():  # noqa: ASYNC110 - its output
                        await trio.sleep(0.01)
                go.set()

            async with trio.open_nursery() as inner:
                inner.start_soon(release_when_waiting)
                with trio.fail_after(TIMEOUT):
                    status = await _submit(args, Output(out=out, err=err))
            stats = await log.statistics()
        await log.ref.stop(1.0)
    assert status == 0, (out.getvalue(), err.getvalue())
    assert out.getvalue().splitlines()[-2:] == ["run 2: ok", 'result: "done"']
    assert stats.subscribers_left.get("slow", 0) == 0
