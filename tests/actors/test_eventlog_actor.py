"""Tests of the event-log actor and its client facade (design §6 over the §1 actor core)."""

from __future__ import annotations

import inspect

import pytest
import trio

from actors import ActorState
from actors._eventlog import ApplyEdit, EventLogActor, EventLogClient, Submit
from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import (
    AlreadyDecided,
    InvalidCommand,
    LedgerCorrupt,
    RemoteToggleDenied,
    UnsupportedOperation,
)

OPS = [OperationSpec(name="preview", fields={"run_id"}), OperationSpec(name="work", fields={})]


async def slow(run, report):
    report(0.5, "half")
    await trio.sleep(2)
    return {"ok": True}


async def test_client_round_trip_over_the_mailbox(nursery, autojump_clock):
    actor = EventLogActor(operations=OPS, runners={"work": slow})
    log = EventLogClient(await nursery.start(actor.run), timeout=5)
    port = await log.subscribe("ui", local=False)
    r = await log.submit("preview", {"run_id": 4}, request_id="a")
    assert (r.admitted, r.run_id) == (True, 1)
    assert (await log.submit("preview", {"run_id": 4}, request_id="a")) == r
    await log.progress(r.run_id, 0.2)
    assert (await log.start(r.run_id)).state == "running"
    assert (await log.finish(r.run_id, "ok", {"png": 2})).verdict == "ok"
    with pytest.raises(AlreadyDecided):
        await log.progress(r.run_id, 0.3)
    with pytest.raises(UnsupportedOperation):
        await log.submit("nope", {})
    w = await log.submit("work", {})
    await trio.sleep(3)
    assert trio.current_time() == 3
    status = await log.status(w.run_id)
    assert (status.state, status.result, status.progress) == ("finished", {"ok": True}, 0.5)
    assert (await log.cancel(w.run_id, "ui")).state == "finished"
    with pytest.raises(RemoteToggleDenied):
        await log.set_port_enabled("ui", False, local=False)
    assert await log.apply_edit() == 1
    assert (await log.check_drift(r.run_id)).changed == ("revision",)
    result = await log.watch(0)
    kinds = [e.kind for e in result.events]
    assert kinds[:6] == [
        "job_queued",
        "job_started",
        "job_progress",
        "job_finished",
        "job_queued",
        "job_started",
    ]
    pushed = []
    while True:
        try:
            pushed.append(port.receive_nowait())
        except trio.WouldBlock:
            break
    assert pushed == list(result.events)
    assert (await log.boot_report()).survivors == ()
    assert (await log.statistics()).head == result.head
    await log.ref.stop(grace=1)
    assert log.ref.state is ActorState.STOPPED


async def test_requests_are_decided_in_mailbox_order(nursery):
    actor = EventLogActor(operations=OPS)
    ref = await nursery.start(actor.run)
    # both queued before the actor runs: the submit is decided first, at revision 0
    ref.try_send(Submit(operation="preview", arguments={"run_id": 1}))
    ref.try_send(ApplyEdit())
    log = EventLogClient(ref, timeout=5)
    receipt = await log.submit("preview", {"run_id": 2})
    assert receipt.revision == 1
    events = (await log.watch(0)).events
    assert [(e.kind, e.data.get("revision")) for e in events] == [
        ("job_queued", 0),
        ("revision_bumped", 1),
        ("job_queued", 1),
    ]
    with pytest.raises(InvalidCommand):
        await ref.ask("what?", timeout=5)
    await ref.stop(grace=1)


async def test_stop_flushes_the_ledger_and_corrupt_ledger_fails_start(tmp_path, nursery):
    path = tmp_path / "ledger.db"
    config = EventLogConfig(ledger_path=path, synchronous="NORMAL")
    actor = EventLogActor(config, operations=OPS)
    log = EventLogClient(await nursery.start(actor.run), timeout=5)
    r = await log.submit("preview", {"run_id": 1})
    await log.start(r.run_id)
    actor.log.progress(r.run_id, 0.7)  # staged only: the stop must commit it
    actor.log.finish(r.run_id, "ok")
    await log.ref.stop(grace=1)
    async with open_event_log(config, operations=OPS) as reopened:
        status = await reopened.status(r.run_id)
        assert (status.state, status.progress, status.interruptions) == ("finished", 0.7, 0)
        assert reopened.boot_report().survivors == ()

    path.write_bytes(b"garbage" * 50)
    with pytest.raises(LedgerCorrupt):
        await nursery.start(EventLogActor(config, operations=OPS).run)
    assert path.read_bytes() == b"garbage" * 50


async def test_bad_requests_get_errors_and_the_actor_stays_up(nursery):
    log = EventLogClient(await nursery.start(EventLogActor(operations=OPS).run), timeout=5)
    await log.subscribe("ui")
    bad_calls = [
        log.status([1]),
        log.cancel("1"),
        log.progress(True, 0.5),
        log.subscribe("ui"),
        log.subscribe(bound=0),
        log.check_drift(1, current=5),
        log.submit("preview", {"run_id": 1}, request_id=""),
        log.submit("preview", {"run_id": object()}),
        log.watch(-1),
        log.finish(1, "ok", error={"code": "x"}),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidCommand):
            await call
    assert log.ref.state is ActorState.RUNNING
    assert (await log.submit("preview", {"run_id": 1})).admitted


def test_every_public_client_method_is_async() -> None:
    # One async style: each method is an ask (or a loop of them), whatever the twin of
    # EventLog is; a user never has to know which ones wait.
    public = [name for name in vars(EventLogClient) if not name.startswith("_")]
    assert {"submit", "record", "recover", "finished_runs", "boot_report"} <= set(public)
    sync = [name for name in public if not inspect.iscoroutinefunction(vars(EventLogClient)[name])]
    assert sync == []


async def test_record_appends_a_log_wide_event_and_bad_input_names_its_field(nursery):
    log = EventLogClient(await nursery.start(EventLogActor(operations=OPS).run), timeout=5)
    seq = await log.record("helper_spawned", {"pid": 7})
    events = (await log.watch(0)).events
    assert [(e.seq, e.kind, e.run_id, e.data) for e in events] == [
        (seq, "helper_spawned", None, {"pid": 7})
    ]
    for kind, data, field in [
        ("job_done", {}, "kind"),  # one of the log's own kinds
        ("Not Snake", {}, "kind"),
        ("fine", {"x": float("nan")}, "data"),
        ("fine", {"x": object()}, "data"),
    ]:
        with pytest.raises(InvalidCommand) as info:
            await log.record(kind, data)
        assert info.value.details["fields"] == [field]
    assert log.ref.state is ActorState.RUNNING
    assert (await log.watch(seq)).events == ()
