"""A real full disk under an event log (run by the test with ``sys.executable``).

Usage: ``python diskfull_app.py DIR`` where DIR is a small, empty tmpfs. The ledger lives
in DIR; a filler file takes the rest of the space. The app submits until the ledger is
unavailable, checks that status and watch still answer and that new work is refused,
frees the space, waits for admission to resume, submits again, closes, reopens and
checks every acknowledged request. It prints one JSON line with what it saw.
"""

from __future__ import annotations

import errno
import json
import os
import sys

import trio

from actors._eventlog._eventlog import open_event_log
from actors._eventlog._types import EventLogConfig, OperationSpec
from actors.errors import LedgerUnavailable

OPS = [OperationSpec(name="job", fields={"n", "pad"})]


def fill(path: str) -> None:
    """Write ``path`` until the disk is full."""
    chunk = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


async def main(directory: str) -> None:
    ledger = os.path.join(directory, "ledger.db")
    filler = os.path.join(directory, "filler")
    config = EventLogConfig(
        ledger_path=ledger, synchronous="NORMAL", ledger_retry_min=0.01, ledger_retry_max=0.05
    )
    acknowledged: dict[str, int] = {}
    report: dict[str, object] = {}
    async with open_event_log(config, operations=OPS) as log:
        port = log.subscribe("watcher")
        for k in range(3):
            receipt = await log.submit("job", {"n": k}, request_id=f"r{k}")
            acknowledged[receipt.request_id] = receipt.run_id or 0
        fill(filler)
        k = 3
        while True:
            try:
                receipt = await log.submit("job", {"n": k, "pad": "p" * 3000}, f"r{k}")
            except LedgerUnavailable as exc:
                report["refused_cause"] = exc.details["cause"]
                break
            acknowledged[receipt.request_id] = receipt.run_id or 0
            k += 1
        report["status_while_full"] = (await log.status(1)).state
        report["watch_while_full"] = len((await log.watch(0, limit=5)).events)
        try:
            await log.submit("job", {"n": -1})
        except LedgerUnavailable:
            report["refused_at_once"] = True
        os.unlink(filler)
        with trio.fail_after(20):
            async for event in port:
                if getattr(event, "kind", None) == "admission_resumed":
                    report["resumed"] = True
                    break
        receipt = await log.submit("job", {"n": -2}, request_id="after")
        report["after_resume"] = receipt.admitted
        acknowledged[receipt.request_id] = receipt.run_id or 0
    lost = []
    async with open_event_log(config, operations=OPS) as log:
        held = {status.run_id for status in log.boot_report().survivors}
        lost = sorted(rid for rid, run_id in acknowledged.items() if run_id not in held)
    report["acknowledged"] = len(acknowledged)
    report["lost"] = lost
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
