"""``HelperPool.run_sync``: any importable function, by reference (design §3.14).

Real helpers, real clock, short timeouts; no child or zombie may be left.
"""

from __future__ import annotations

import functools
import math
import threading
from fractions import Fraction

import attrs
import pytest
import run_sync_functions as fns
import trio
from helper_support import FAST, assert_no_children

from actors import (
    AskTimeout,
    DeadlineExceeded,
    FunctionNotImportable,
    FunctionRaised,
    HelperSpec,
    JobStalled,
    NotPicklable,
    PoolActor,
    PoolConfig,
    PoolEventStream,
    PoolHandle,
    ReplyTimeout,
    open_helper_pool,
)

CALLS = HelperSpec(entry="actors.helper:serve_calls", name="calls")


def drained_kinds(stream: PoolEventStream) -> list[str]:
    """The kinds of every event the stream holds now (never waits)."""
    kinds = []
    while (event := stream.receive_nowait()) is not None:
        kinds.append(event.kind)
    return kinds


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def test_arguments_keywords_and_the_result_round_trip():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        got = await pool.run_sync(
            fns.describe, 1, "two", [3.0], {"four": (4,)}, b"\x05", five=Fraction(1, 5)
        )
        helper_pid = pool.snapshot().helpers[0].pid
        assert got == {
            "args": (1, "two", [3.0], {"four": (4,)}, b"\x05"),
            "kwargs": {"five": Fraction(1, 5)},
            "pid": helper_pid,
        }
        assert await pool.run_sync(fns.scale, fns.Point(1, 2), factor=3) == fns.Point(3, 6)
        assert await pool.run_sync(math.hypot, 3, 4) == 5.0  # a builtin
        assert await pool.run_sync(fns.Point, 1, 1) == fns.Point(1, 1)  # a class
        assert await pool.run_sync(fns.Point.origin) == fns.Point(0, 0)  # a classmethod
        assert await pool.run_sync(fns.Point(3, 4).norm) == 5.0  # runs on a copy
        assert await pool.run_sync(functools.partial(fns.add, 2), 3) == 5
        assert await pool.run_sync(fns.square, 12) == 144
        statistics = pool.statistics()
    assert (statistics.jobs_started, statistics.jobs_succeeded, statistics.jobs_failed) == (8, 8, 0)


VALUES = [
    None,
    True,
    0,
    -(2**63) + 1,
    2**63,  # past 64 bits: pickled
    2**200,
    1.5,
    math.inf,  # not JSON: pickled
    -0.0,
    "",
    "héllo ✓",
    "\udc80",  # a lone surrogate: not JSON, pickled
    (1, 2),
    [1, (2,)],
    {"a": {1, 2}},
    b"bytes",
    Fraction(1, 3),
]


async def test_every_value_comes_back_equal_and_of_its_type():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        for value in VALUES:
            got = await pool.run_sync(fns.identity, value)
            assert (type(got), got) == (type(value), value)
        got = await pool.run_sync(fns.identity, math.nan)
        assert math.isnan(got)
        assert math.copysign(1.0, await pool.run_sync(fns.identity, -0.0)) == -1.0


async def test_an_exception_comes_back_with_its_type_message_and_remote_traceback():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(FunctionRaised) as caught:
            await pool.run_sync(fns.fail, "bad input 7")
        statistics = pool.statistics()
        assert await pool.run_sync(fns.square, 3) == 9  # the helper is fine
    error = caught.value
    assert (error.code, error.category) == ("function_raised", "permanent")
    assert (error.remote_type, error.remote_message) == ("ValueError", "bad input 7")
    assert str(error) == "run_sync_functions:fail raised ValueError: bad input 7"
    assert error.details == {"remote_type": "ValueError", "function": "run_sync_functions:fail"}
    tb = error.remote_traceback
    assert tb.startswith("Traceback (most recent call last):")
    assert "in fail\n    inner()" in tb
    assert "in inner\n    raise ValueError(message)" in tb
    assert tb.endswith("ValueError: bad input 7\n")
    assert "_child/_call.py" not in tb  # starts in the function
    assert type(error.__cause__) is ValueError
    assert str(error.__cause__) == "bad input 7"
    assert (statistics.jobs_succeeded, statistics.jobs_failed) == (0, 1)


async def test_an_exception_that_does_not_unpickle_still_says_what_it_was():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(FunctionRaised) as caught:
            await pool.run_sync(fns.refuse, "the lid")
    error = caught.value
    assert error.remote_type == "run_sync_functions.Refusal"
    assert error.remote_message == "the lid: no reason"
    assert "raise Refusal(what, " in error.remote_traceback
    assert error.__cause__ is None


async def test_an_exception_with_a_code_and_category_keeps_them_and_is_retryable():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(FunctionRaised) as caught:
            await pool.run_sync(fns.fail_transiently, "try later")
    assert (caught.value.code, caught.value.category) == ("disk_busy", "transient")
    assert caught.value.retryable


def _local_function() -> object:
    def inner() -> int:
        return 1

    return inner


def _local_instance() -> object:
    class Local:
        def method(self) -> int:
            return 1

    return Local()


def _defined_in_main() -> int:
    return 1


_defined_in_main.__module__ = "__main__"


@pytest.mark.parametrize(
    ("fn", "reason", "why"),
    [
        (lambda: 1, "lambda", "a lambda has no importable name"),
        (_local_function(), "local", "it is defined inside _local_function() (a closure"),
        (_local_instance().method, "local", "it is defined inside _local_instance() (a closure"),
        ([].append, "bound_method", "it is a method bound to an object no import reaches"),
        (_defined_in_main, "main", "it is defined in __main__, which a helper does not run"),
        (functools.partial(lambda x: x, 1), "lambda", "a lambda has no importable name"),
        (42, "not_callable", "it is not callable"),
    ],
)
async def test_what_cannot_be_imported_is_refused_before_anything_is_sent(fn, reason, why):
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(FunctionNotImportable) as caught:
            await pool.run_sync(fn)
        with pytest.raises(FunctionNotImportable):
            await pool.map(fn, [1, 2])
        assert pool.statistics().jobs_started == 0
    assert caught.value.code == "function_not_importable"
    assert why in str(caught.value)
    assert str(caught.value).startswith("run_sync cannot send ")
    assert caught.value.details["function"] in str(caught.value)
    assert caught.value.details["reason"] == reason


async def test_unpicklable_arguments_are_refused_before_anything_is_sent():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(NotPicklable) as caught:
            await pool.run_sync(fns.describe, threading.Lock())
        assert pool.statistics().jobs_started == 0
    assert caught.value.details == {"what": "arguments", "function": "run_sync_functions:describe"}
    assert "cannot pickle '_thread.lock' object" in str(caught.value)


async def test_an_unpicklable_result_is_an_error_and_the_helper_stays():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pytest.raises(NotPicklable) as caught:
            await pool.run_sync(fns.make_lock)
        pid = pool.snapshot().helpers[0].pid
        assert await pool.run_sync(fns.square, 2) == 4
        assert pool.snapshot().helpers[0].pid == pid
    assert caught.value.details == {"what": "result", "function": "run_sync_functions:make_lock"}
    assert "the result of run_sync_functions:make_lock does not pickle" in str(caught.value)


async def test_a_function_the_helper_cannot_import_names_it(tmp_path):
    # Importable here (a path added after the helper started), not in the helper.
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        await pool.run_sync(fns.square, 1)
        (tmp_path / "late_module_rs.py").write_text("def f():\n    return 1\n")
        import sys

        sys.path.insert(0, str(tmp_path))
        try:
            import late_module_rs  # type: ignore[import-not-found]

            with pytest.raises(FunctionNotImportable) as caught:
                await pool.run_sync(late_module_rs.f)
        finally:
            sys.path.remove(str(tmp_path))
            sys.modules.pop("late_module_rs", None)
    assert "the helper cannot import late_module_rs:f" in str(caught.value)
    assert caught.value.details["reason"] == "not_importable_in_helper"
    assert "No module named 'late_module_rs'" in str(caught.value)


async def test_a_deadline_stops_the_call_through_the_ladder():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pool.events.subscribe() as stream:
            start = trio.current_time()
            with pytest.raises(DeadlineExceeded) as caught:
                await pool.run_sync(fns.block, deadline=start + 0.3)
            elapsed = trio.current_time() - start
            kinds = drained_kinds(stream)
        assert await pool.run_sync(fns.square, 5) == 25  # a fresh helper serves
    assert caught.value.code == "deadline_exceeded"
    assert caught.value.details["escalation"] == "sigterm"
    assert "cancel_sent" in kinds
    assert "sigterm_sent" in kinds
    assert 0.3 + FAST.cancel_grace <= elapsed < 0.3 + FAST.ladder + 1.0


async def test_a_silent_call_stalls_and_a_long_one_meets_the_reply_deadline():
    timeouts = attrs.evolve(FAST, reply=0.4)
    async with open_helper_pool(CALLS, timeouts=timeouts) as pool:
        with pytest.raises(JobStalled) as stalled:
            await pool.run_sync(fns.block, stall=0.2)
        with pytest.raises(ReplyTimeout):
            await pool.run_sync(fns.block)
        assert await pool.run_sync(fns.square, 0) == 0
    assert stalled.value.details["stall"] == 0.2


async def test_cancelling_the_caller_runs_the_ladder_then_cancelled_propagates():
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        with pool.events.subscribe() as stream:
            with trio.move_on_after(0.3) as scope:
                await pool.run_sync(fns.block)
            kinds = drained_kinds(stream)
            helper = pool.snapshot().helpers[0]
    assert scope.cancelled_caught
    assert kinds.index("cancel_sent") < kinds.index("sigterm_sent")
    assert (helper.alive, helper.exit_code) == (False, -15)  # stopped before we went on


async def test_a_handle_runs_calls_through_the_pool_actor(nursery):
    ref = await nursery.start(PoolActor(CALLS, PoolConfig(size=2, timeouts=FAST)).run)
    handle = PoolHandle(ref)
    try:
        # A map first: it leases the pool to learn its size (the default limit).
        assert await PoolHandle(ref).map(fns.square, range(5)) == [0, 1, 4, 9, 16]
        assert await handle.run_sync(fns.add, 2, y=5) == 7
        assert await handle.map(fns.square, range(5)) == [0, 1, 4, 9, 16]
        with pytest.raises(FunctionRaised):
            await handle.run_sync(fns.fail, "no")
        statistics = await handle.statistics()
        assert (statistics.jobs_succeeded, statistics.jobs_failed) == (11, 1)
        with pytest.raises(AskTimeout):  # the job was stopped through its ladder
            await handle.run_sync(fns.block, timeout=0.3)
        with pytest.raises(ValueError, match="timeout"):
            await handle.run_sync(fns.square, 1, timeout=-1)
    finally:
        await ref.stop()
