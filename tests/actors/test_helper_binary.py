"""Binary parts through a real helper (design §2.3, §3.9, §3.14): job results, progress
reports, error replies and ``run_sync`` results carry raw bytes beside their JSON, and a
part that is too big or lies about its length fails that job or that helper, never the
pool.

Real subprocesses, real clock (contributing §F.3); every test checks that no child remains.
"""

from __future__ import annotations

from typing import Any

import pytest
import run_sync_functions as fns
import trio
from helper_support import FAST, assert_no_children, spec

from actors import (
    FunctionRaised,
    HelperTimeouts,
    JobFailed,
    ProtocolViolation,
    ReplyTimeout,
    open_helper_pool,
)
from protocol import Blob

CALLS = spec(entry="actors.helper:serve_calls")
PNG_SIZE = 50_000  # about a preview's PNG


def pattern(size: int) -> bytes:
    """What the test entry's ``pattern`` sends: every byte value 0..255 in turn."""
    return (bytes(range(256)) * (size // 256 + 1))[:size]


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def test_a_job_result_with_bytes_is_a_blob_of_a_view():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        got = await pool.run_job("blob", {"size": PNG_SIZE})
        alone = await pool.run_job("blob", {"size": 3, "raw": True})
        empty = await pool.run_job("blob", {"size": 0})
        assert await pool.run_job("echo", {"text": "only"}) == {"text": "only"}  # unchanged
    assert type(got) is Blob
    assert got.head == {"size": PNG_SIZE}
    assert type(got.data) is memoryview  # a view of the frame read, not a copy
    assert got.data.readonly
    assert got.data == pattern(PNG_SIZE)
    assert alone == Blob(data=b"\x00\x01\x02")  # bytes alone: no head
    assert empty == Blob(head={"size": 0}, data=b"")


async def test_progress_with_bytes_reaches_on_progress():
    reports: list[tuple[Any, ...]] = []
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        got = await pool.run_job(
            "blob_progress", 1000, on_progress=lambda *report: reports.append(report)
        )
    assert got == Blob(data=b"done")
    assert [(fraction, note) for fraction, note, _ in reports] == [(0.5, "half"), (1.0, None)]
    assert [bytes(data) for _, _, data in reports] == [pattern(1000)] * 2


async def test_an_error_with_bytes_keeps_them_beside_the_record():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("blob_fail", 2000)
        with pytest.raises(JobFailed) as without:
            await pool.run_job(
                "fail", {"message": "plain", "code": "plain_failure", "category": "permanent"}
            )
        assert await pool.run_job("echo", 1) == 1  # the helper is still usable
    assert caught.value.code == "bad_input"
    assert caught.value.message == "the input does not parse"
    assert caught.value.data == pattern(2000)
    assert caught.value.record.message == "the input does not parse"  # bytes not in it
    assert without.value.data is None


async def test_a_part_over_the_reply_limit_fails_the_job_naming_the_field():
    async with open_helper_pool(spec(max_reply=8192), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("blob", {"size": 8192})  # the limit is on the whole frame
        fits = await pool.run_job("blob", {"size": 8000})
        helper = pool.snapshot().helpers[0]
    assert caught.value.code == "reply_unencodable"
    assert "binary part (field 'data') is 8192 bytes" in caught.value.message
    assert fits.data == pattern(8000)
    assert helper is not None
    assert helper.incarnation == 1  # the same helper served both: no restart


async def test_a_part_that_lies_about_its_length_retires_that_helper_only():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(ProtocolViolation) as caught:
            await pool.run_job("blob_lie")
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        assert (helper.alive, helper.exit_code) == (False, -9)  # killed at once
        again = await pool.run_job("blob", {"size": 10})  # the pool goes on
    assert caught.value.details["field"] == "data"
    assert again.data == pattern(10)


async def test_a_reply_cut_inside_its_part_is_a_truncated_frame():
    timeouts = HelperTimeouts(reply=0.3, cancel_grace=0.2, terminate=0.5, kill=0.5)
    async with open_helper_pool(spec(fault="partial_frame"), timeouts=timeouts) as pool:
        with pytest.raises(ReplyTimeout) as caught:
            await pool.run_job("blob", {"size": 4000})  # half the frame: inside the part
        helper = pool.snapshot().helpers[0]
    assert caught.value.code == "reply_timeout"
    assert helper is not None
    assert helper.exit_code == -15


async def test_run_sync_bytes_come_back_as_bytes_without_pickle():
    big = pattern(PNG_SIZE)
    async with open_helper_pool(CALLS, timeouts=FAST) as pool:
        got = await pool.run_sync(fns.identity, big)  # bytes there and back, no base64
        keyed = await pool.run_sync(fns.describe, big, key=b"\x00")  # pickled: a binary part
        nested = await pool.run_sync(fns.identity, {"png": big})
        with pytest.raises(FunctionRaised) as raised:
            await pool.run_sync(fns.fail, "bad")
    assert (type(got), got) == (bytes, big)
    assert (keyed["args"], keyed["kwargs"]) == ((big,), {"key": b"\x00"})
    assert nested == {"png": big}
    cause = raised.value.__cause__  # the exception, pickled as a binary part
    assert (type(cause), str(cause)) == (ValueError, "bad")


async def test_many_binary_replies_in_a_row():
    sizes = [0, 1, 255, 4096, 65_535, 65_536, 65_537, 200_000]
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        for size in sizes:
            got = await pool.run_job("blob", {"size": size})
            assert got == Blob(head={"size": size}, data=pattern(size))
        with trio.fail_after(10):
            for _ in range(50):
                assert (await pool.run_job("blob", {"size": 100, "raw": True})).data == pattern(100)
