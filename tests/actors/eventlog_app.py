"""A tiny event-log server process for the crash test (run with ``sys.executable``).

Usage: ``python eventlog_app.py LEDGER ACTION...``. It starts the event-log actor on a
file ledger, performs the actions in order and prints one JSON line per action:

* ``submit:REQUEST_ID:N`` — submit ``block`` with ``{"n": N}``; prints the receipt;
* ``boot`` — prints the boot report (run ids per list) and the log's counters;
* ``resume:RUN_ID`` / ``resume!:RUN_ID`` (with override) / ``discard:RUN_ID``;
* ``status:RUN_ID``; ``running:K`` — waits until K runners are blocked;
* ``hold`` — prints ``{"action": "hold"}`` and waits forever (to be SIGKILLed).

The ``block`` runner blocks forever; ``calls`` counts how often a runner started.
"""

from __future__ import annotations

import json
import sys

import trio

from actors._eventlog import EventLogActor, EventLogClient
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import ActorError
from protocol.codec import unstructure_message

calls: list[int] = []
called = trio.Event()


async def block(run, report):
    global called
    calls.append(run.run_id)
    called.set()
    called = trio.Event()
    await trio.sleep_forever()


def emit(action: str, **fields) -> None:
    print(json.dumps({"action": action, **fields}), flush=True)


async def main(path: str, actions: list[str]) -> None:
    config = EventLogConfig(ledger_path=path, max_concurrency=1, synchronous="NORMAL")
    actor = EventLogActor(
        config, operations=[OperationSpec(name="block", fields={"n"})], runners={"block": block}
    )
    async with trio.open_nursery() as nursery:
        log = EventLogClient(await nursery.start(actor.run), timeout=5)
        for action in actions:
            verb, _, rest = action.partition(":")
            try:
                if verb == "submit":
                    request_id, n = rest.split(":")
                    receipt = await log.submit("block", {"n": int(n)}, request_id)
                    emit(verb, receipt=unstructure_message(receipt))
                elif verb == "boot":
                    report = await log.boot_report()
                    stats = await log.statistics()
                    emit(
                        verb,
                        survivors=[s.run_id for s in report.survivors],
                        interrupted={s.run_id: s.interruptions for s in report.interrupted},
                        quarantined=[s.run_id for s in report.quarantined],
                        queued=stats.queued,
                        running=stats.running,
                        calls=len(calls),
                    )
                elif verb in ("resume", "resume!"):
                    status = await log.resume(int(rest), override=verb == "resume!")
                    emit(verb, state=status.state)
                elif verb == "discard":
                    status = await log.discard(int(rest), actor="operator")
                    emit(verb, state=status.state, by=status.cancelled_by)
                elif verb == "status":
                    emit(verb, status=(await log.status(int(rest))).to_dict())
                elif verb == "running":
                    with trio.fail_after(5):
                        while len(calls) < int(rest):
                            await called.wait()
                    emit(verb, calls=list(calls))
                elif verb == "hold":
                    emit(verb)
                    await trio.sleep_forever()
            except ActorError as exc:
                emit(verb, error=exc.code)
        await log.ref.stop(grace=1)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2:])
