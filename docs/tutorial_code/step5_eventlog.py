"""Step 5: a durable event log: submit, follow, stop, reopen, resume, query."""

import tempfile
from pathlib import Path

import trio

from actors import (
    Decision,
    Event,
    EventLogActor,
    EventLogClient,
    EventLogConfig,
    OperationSpec,
    ProgressReporter,
    RunStatus,
    Survivor,
)

OPERATIONS = [OperationSpec(name="square", fields={"n"}, required={"n"})]


async def square(run: RunStatus, progress: ProgressReporter) -> dict[str, int]:
    """The runner of ``square``: the log runs it for each queued run (design §6.6)."""
    n = run.arguments["n"]
    progress(0.5, "halfway")
    return {"square": n * n}


async def decide(survivor: Survivor) -> Decision:
    """What to do with a run held from before the restart."""
    return "keep" if survivor.status.quarantined else "resume"


def show(event: Event) -> None:
    detail = event.data.get("verdict", event.data.get("fraction", ""))
    print(f"{event.seq} {event.kind} run {event.run_id} {detail}".rstrip())


async def first_process(ledger: Path) -> None:
    config = EventLogConfig(ledger_path=ledger)
    async with trio.open_nursery() as nursery:
        # No runner yet: runs wait for whoever executes them.
        ref = await nursery.start(EventLogActor(config, operations=OPERATIONS).run)
        log = EventLogClient(ref, timeout=5.0)
        first = await log.submit("square", {"n": 3}, request_id="req-1")
        again = await log.submit("square", {"n": 3}, request_id="req-1")  # a retry
        print("run", first.run_id, "again", again.run_id)
        await log.submit("square", {"n": 4}, request_id="req-2")
        assert first.run_id is not None  # admitted (a refusal has a code instead)

        # Execute the first run by hand: start, progress, finish.
        await log.start(first.run_id)
        await log.progress(first.run_id, 1.0)
        await log.finish(first.run_id, "ok", {"square": 9})

        # Follow what happened from cursor 0; the answer's cursor is where to go on.
        result = await log.watch(0)
        for event in result.events:
            show(event)
        print("cursor", result.cursor)
        await ref.stop(grace=5.0)  # the second run is left unfinished, in the ledger


async def second_process(ledger: Path) -> None:
    config = EventLogConfig(ledger_path=ledger)
    runners = {"square": square}
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(EventLogActor(config, operations=OPERATIONS, runners=runners).run)
        log = EventLogClient(ref, timeout=5.0)
        head = (await log.watch(0)).cursor
        with await log.subscribe(cursor=head) as port:  # every event after head
            for outcome in await log.recover(decide):  # one call decides every survivor
                print("recovered", outcome.run_id, outcome.decision, outcome.status.state)
            async for item in port:
                if isinstance(item, Event):
                    show(item)
                    if item.kind == "job_finished":
                        break

        page = await log.finished_runs(verdict="ok")
        for run in page.runs:
            print("finished", run.run_id, run.arguments, run.result)
        await ref.stop(grace=5.0)


async def main() -> None:
    ledger = Path(tempfile.mkdtemp()) / "ledger.db"
    await first_process(ledger)
    await second_process(ledger)


if __name__ == "__main__":
    trio.run(main)
