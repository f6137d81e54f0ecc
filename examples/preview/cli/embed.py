"""The runtime embedded as a library: thumbnails of a QCoDeS database, no server.

The smallest complete use of :func:`actors.open_runtime`: helper processes read the
database read-only, the scheduler orders the work (the selected run first), the
renderer draws PNGs in a worker thread, and the program saves them::

    python -m examples.preview.cli.embed tests/data/qcodes_sample.db --select 4 --out thumbs

Leaving the ``async with`` block stops the four actors and reaps every helper.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import trio

from actors import (
    HelperSpec,
    PoolConfig,
    Published,
    Render,
    RendererConfig,
    RunInfo,
    Runtime,
    RuntimeConfig,
    SchedulerConfig,
    SchedulerJob,
    SetPriority,
    Settled,
    SourceUnreadable,
    open_runtime,
)

from ..app import HELPER_PACKAGE, PNG_PAYLOADS, PREVIEW_KINDS, RunTable
from ..child.drawing.render import render
from ..child.qcodes.source import open_source

ROOT = Path(__file__).resolve().parents[3]


async def execute(job: SchedulerJob, runtime: Runtime) -> Any:
    """Do one claim of the scheduler: read a run, or draw it (design §4, §5)."""
    claim = job.claim
    if claim.kind == "metadata":  # a helper-process job: the DB is read in the helper
        return await runtime.pool.run_job("read_run", {"run_id": claim.run_id}, timeout=10)
    rendered = await runtime.renderer.ask(
        Render(observation=job.observation, kind=claim.kind, deadline=claim.deadline),
        timeout=10,
    )
    return rendered.data


def list_runs(db: Path) -> list[RunInfo]:
    """The runs of ``db`` in table order (blocking; call it before the event loop).

    Raises:
        SourceUnreadable: (code ``source_unreadable``) missing file, not SQLite, not QCoDeS.
    """
    table = RunTable()  # gives runs without a GUID, or sharing one, their own
    with open_source(db) as source:
        for summary in source.list_runs():
            table.register(summary, 0.0)
    return table.infos()


async def main(db: Path, runs: list[RunInfo], out: Path, select: int | None) -> list[Path]:
    """Render every run of ``db`` into the existing folder ``out``; return the files."""
    config = RuntimeConfig(
        helper=HelperSpec(
            entry=f"{HELPER_PACKAGE}.helper:main", options={"db": str(db)}, cwd=str(ROOT)
        ),
        pool=PoolConfig(size=2),
        render_fn=render,
        renderer=RendererConfig(**PNG_PAYLOADS),
        scheduler=SchedulerConfig(kinds=PREVIEW_KINDS),
        execute=execute,
        runs=runs,
    )
    written: list[Path] = []
    settled: set[int] = set()
    async with open_runtime(config) as runtime:
        await runtime.scheduler.send(SetPriority(selected=select, visible=()))
        async for notice in runtime.scheduler_events:
            if isinstance(notice, Published) and isinstance(notice.result, bytes):
                path = out / f"run{notice.run_id}-{notice.kind}.png"
                await trio.Path(path).write_bytes(notice.result)
                written.append(path)
                print(f"run {notice.run_id:3d} {notice.kind:9s} {len(notice.result):7d} bytes")
            elif isinstance(notice, Settled):
                settled.add(notice.run_id)
                if len(settled) == len(runs):
                    break
    return written


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.preview.cli.embed", description=__doc__.split("\n")[0]
    )
    parser.add_argument("db", type=Path, help="a QCoDeS SQLite database")
    parser.add_argument("--out", type=Path, default=Path("thumbs"), help="folder for the PNGs")
    parser.add_argument("--select", type=int, default=None, help="the run to draw first")
    args = parser.parse_args(argv)
    try:
        runs = list_runs(args.db)
        args.out.mkdir(parents=True, exist_ok=True)
        trio.run(main, args.db.resolve(), runs, args.out, args.select)
    except SourceUnreadable as exc:
        print(f"embed: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
