"""Tests for protocol.messages: the client protocol's attrs classes (design §2.1, §2.4)."""

from __future__ import annotations

import re
import typing

import attrs
import pytest
from message_examples import EXAMPLES

from protocol import (
    TAGS,
    ActorError,
    Cancel,
    ClientRequest,
    DatabaseInfo,
    ErrorReply,
    Event,
    Events,
    GetBootReport,
    ImageReady,
    ListRuns,
    Message,
    OkReply,
    Resume,
    ResyncRequired,
    RunList,
    RunSummary,
    ServerMessage,
    StatusReply,
    Submit,
    UseDatabase,
    Visible,
)


def test_examples_cover_every_class() -> None:
    assert {type(example) for example in EXAMPLES} == set(TAGS)
    assert set(TAGS) == set(typing.get_args(Message))
    assert set(typing.get_args(Message)) == set(typing.get_args(ClientRequest)) | set(
        typing.get_args(ServerMessage)
    )


def test_tags_are_unique_snake_case() -> None:
    tags = list(TAGS.values())
    assert len(set(tags)) == len(tags)
    for tag in tags:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", tag)
    assert TAGS[GetBootReport] == "boot_report"
    assert TAGS[ListRuns] == "list_runs"
    assert TAGS[ErrorReply] == "error"
    assert TAGS[OkReply] == "ok"
    assert TAGS[ResyncRequired] == "resync_required"


@pytest.mark.parametrize("cls", list(TAGS))
def test_every_class_is_frozen_slotted_kw_only(cls: type) -> None:
    assert attrs.has(cls)
    assert "__slots__" in cls.__dict__
    for field in attrs.fields(cls):
        assert field.kw_only
        assert field.name == field.name.lower()
    example = next(e for e in EXAMPLES if type(e) is cls)
    first = attrs.fields(cls)[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(example, first, getattr(example, first))


def test_requests_carry_a_request_id() -> None:
    for cls in typing.get_args(ClientRequest):
        assert attrs.fields(cls)[0].name == "request_id"
        assert attrs.fields(cls).request_id.type in ("str", str)


_IMAGE = {
    "db": "d-1", "run_id": 1, "kind": "preview", "revision": 1, "mime": "image/png",
    "url": "/db/d-1/runs/1/preview.png?rev=1", "width": 640, "height": 480, "bytes": 10,
}  # fmt: skip


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Cancel(request_id="", run_id=1), "request_id"),
        (lambda: Cancel(request_id="x" * 129, run_id=1), "request_id"),
        (lambda: Cancel(request_id="r", run_id=-1), "run_id"),
        (lambda: Cancel(request_id="r", run_id=2**53), "run_id"),
        (lambda: Cancel(request_id="r", run_id=True), "run_id"),
        (lambda: Cancel(request_id="r", run_id="1"), "run_id"),
        (lambda: Submit(request_id="r", operation=""), "operation"),
        (lambda: Submit(request_id="r", operation="x", arguments=[]), "arguments"),
        (lambda: Submit(request_id="r", operation="x", arguments={1: 2}), "arguments"),
        (lambda: Visible(request_id="r", run_ids=[1]), "run_ids"),
        (lambda: Visible(request_id="r", run_ids=(1, -2)), "run_ids"),
        (lambda: Visible(request_id="r", run_ids=tuple(range(1025))), "run_ids"),
        (lambda: Resume(request_id="r", run_id=1, override=1), "override"),
        (lambda: Event(seq=1, kind="Job Queued"), "kind"),
        (lambda: Events(request_id=None, events=({"seq": 1},), cursor=1), "events"),
        (
            lambda: ErrorReply(request_id=None, code="x", message="m" * 1025, retryable=False),
            "message",
        ),
        (lambda: StatusReply(request_id=None, run_id=1, state="running", progress=1.5), "progress"),
        (
            lambda: StatusReply(request_id=None, run_id=1, state="running", progress=True),
            "progress",
        ),
        (lambda: RunSummary(run_id=1, name="n", experiment="e", completed=1, rows=0), "completed"),
        (
            lambda: RunSummary(
                run_id=1, name="n", experiment="e", completed=True, rows=0, status="Being Written"
            ),
            "status",
        ),
        (
            lambda: RunSummary(
                run_id=1, name="n", experiment="e", completed=True, rows=0, job_run_id=-1
            ),
            "job_run_id",
        ),
        *[
            (lambda url=url: ImageReady(**{**_IMAGE, "url": url}), "url")
            for url in (
                "",
                "db/x.png",
                "//evil.example/x.png",
                "/a b.png",
                "/\u00e9.png",
                "http://h/x.png",
                "/" + "a" * 2048,
            )
        ],
        (lambda: ImageReady(**{**_IMAGE, "bytes": -1}), "bytes"),
        (lambda: DatabaseInfo(db="d", name="d.db", state="broken"), "state"),
        (lambda: DatabaseInfo(db="", name="d.db", state="idle"), "db"),
        (lambda: UseDatabase(request_id="r", db="x" * 65), "db"),
    ],
)
def test_validators_name_the_field(make: typing.Callable[[], object], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        make()


def test_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError):
        Cancel("r", 1)  # type: ignore[misc]


def test_subclassing_is_not_needed_for_tags() -> None:
    # The tag lives in TAGS, not on instances: messages are plain data.
    assert not hasattr(Cancel(request_id="r", run_id=1), "type")


class _Busy(ActorError):
    code = "source_busy"
    category = "transient"


def test_error_reply_from_error() -> None:
    reply = ErrorReply.from_error(_Busy("é" * 2000, depth=3), request_id="r1")
    assert reply.code == "source_busy"
    assert reply.retryable is True
    assert reply.details == {"depth": 3}
    assert len(reply.message.encode()) <= 1024
    assert reply.message.endswith("…")
    permanent = ErrorReply.from_error(ActorError("no"), request_id=None)
    assert (permanent.code, permanent.retryable, permanent.request_id) == (
        "actor_error",
        False,
        None,
    )


def test_run_summary_status_and_job_are_optional_additions() -> None:
    from protocol.codec import decode_server_message, unstructure_message

    # A run list written before ``status`` and ``job_run_id`` existed still decodes.
    old = '{"type":"run_list","request_id":null,"runs":[{"run_id":1,"name":"n",'
    old += '"experiment":"e","sample":null,"guid":null,"shape":[],"completed":true,"rows":3}]}'
    (summary,) = decode_server_message(old, max_size=4096).runs  # type: ignore[union-attr]
    assert (summary.status, summary.job_run_id) == (None, None)
    new = RunSummary(
        run_id=1, name="n", experiment="e", completed=False, rows=3, status="progressive",
        job_run_id=7,
    )  # fmt: skip
    (wire,) = unstructure_message(RunList(request_id=None, runs=(new,)))["runs"]
    assert (wire["status"], wire["job_run_id"]) == ("progressive", 7)
