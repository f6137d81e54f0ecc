"""The wire fields that say when to retry and whom a cancel concerns (design §6.14-§6.16)."""

from __future__ import annotations

import json
import math
from typing import ClassVar

import pytest

from protocol import (
    ActorError,
    Cancel,
    ErrorReply,
    InvalidMessage,
    Receipt,
    ResyncRequired,
    SnapshotReply,
    StatusReply,
)
from protocol.codec import decode_client_message, decode_server_message, encode_message
from protocol.messages import FieldError


class _Unavailable(ActorError):
    code: ClassVar[str] = "ledger_unavailable"
    category: ClassVar[str] = "transient"  # type: ignore[misc]


class _Corrupt(ActorError):
    code: ClassVar[str] = "ledger_corrupt"


def _refusal(**fields: object) -> Receipt:
    base: dict[str, object] = {
        "request_id": "r1", "admitted": False, "run_id": None, "snapshot_id": None,
        "revision": 0, "event_cursor": 3, "code": "admission_full", "retryable": True,
    }  # fmt: skip
    return Receipt(**{**base, **fields})  # type: ignore[arg-type]


def test_an_error_reply_carries_the_hint_of_a_retryable_error() -> None:
    error = _Unavailable("disk full", retry_after=0.4, cause="SQLITE_FULL")
    reply = ErrorReply.from_error(error, request_id="r1")
    assert (reply.retry_after, reply.retryable) == (0.4, True)
    assert reply.details == {"retry_after": 0.4, "cause": "SQLITE_FULL"}
    assert json.loads(encode_message(reply))["retry_after"] == 0.4


@pytest.mark.parametrize("hint", [math.nan, math.inf, -1.0, True, "1", None])
def test_a_hint_that_is_not_seconds_is_not_passed_on(hint: object) -> None:
    reply = ErrorReply.from_error(_Unavailable("x", retry_after=hint), request_id=None)
    assert reply.retry_after is None


def test_a_permanent_error_never_says_retry() -> None:
    reply = ErrorReply.from_error(_Corrupt("bad row", retry_after=1.0), request_id="r")
    assert (reply.retryable, reply.retry_after) == (False, None)


def test_retry_after_is_checked_and_named() -> None:
    assert _refusal(retry_after=0).retry_after == 0
    for bad in (-0.5, math.nan, math.inf, True, "2"):
        with pytest.raises(FieldError, match=r"^retry_after: must be"):
            _refusal(retry_after=bad)
    text = encode_message(_refusal(retry_after=0.25)).replace("0.25", "-1")
    with pytest.raises(InvalidMessage) as info:
        decode_server_message(text)
    assert info.value.details["fields"] == ["$.retry_after"]


def test_fields_added_later_are_left_out_while_null() -> None:
    # A client that knows only the first release's fields reads these unchanged.
    assert "retry_after" not in json.loads(encode_message(_refusal()))
    assert encode_message(ResyncRequired(head=5)) == '{"type":"resync_required","head":5}'
    assert json.loads(encode_message(ResyncRequired(head=5, cursor=2)))["cursor"] == 2
    cancel = '{"type":"cancel","request_id":"c","run_id":7,"waiter":"cli-1"}'
    assert decode_client_message(cancel) == Cancel(request_id="c", run_id=7, waiter="cli-1")
    assert encode_message(Cancel(request_id="c", run_id=7)) == (
        '{"type":"cancel","request_id":"c","run_id":7}'
    )
    with pytest.raises(InvalidMessage) as info:
        decode_client_message('{"type":"cancel","request_id":"c","run_id":7,"waiter":""}')
    assert info.value.details["fields"] == ["$.waiter"]


def test_a_snapshot_reply_nests_status_replies() -> None:
    run = StatusReply(request_id=None, run_id=4, state="queued", detail={"waiters": 2})
    reply = SnapshotReply(request_id="s", cursor=10, revision=1, runs=(run,))
    data = json.loads(encode_message(reply))
    assert data["runs"] == [
        {"request_id": None, "run_id": 4, "state": "queued", "verdict": None,
         "progress": None, "detail": {"waiters": 2}},
    ]  # fmt: skip
    assert decode_server_message(encode_message(reply)) == reply
    with pytest.raises(FieldError, match=r"^runs: must be a tuple of StatusReply"):
        SnapshotReply(request_id="s", cursor=1, revision=0, runs=({"run_id": 1},))  # type: ignore[arg-type]
