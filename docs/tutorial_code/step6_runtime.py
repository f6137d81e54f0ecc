"""Step 6: everything together under open_runtime."""

from typing import Any

import trio

from actors import (
    ChildSpec,
    Event,
    HelperSpec,
    LiveRef,
    OperationSpec,
    PoolConfig,
    ProgressReporter,
    RunStatus,
    Runtime,
    RuntimeConfig,
    open_runtime,
)

from step3_actor import Add, Counter, Total
from work import count_primes


class App:
    """The application's own part: the runner the event log calls, and its state."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None  # set once the runtime is open

    async def count(self, run: RunStatus, progress: ProgressReporter) -> dict[str, int]:
        assert self.runtime is not None
        limit = run.arguments["limit"]
        primes = await self.runtime.pool.run_sync(count_primes, limit, timeout=10)
        done: LiveRef[Add | Total, int] = self.runtime.supervisor.child("counter")
        await done.send(Add(amount=1))  # the counter of finished runs
        return {"limit": limit, "primes": primes}


async def main() -> None:
    app = App()
    config = RuntimeConfig(
        helper=HelperSpec(entry="actors.helper:serve_calls"),
        pool=PoolConfig(size=2),
        operations=[OperationSpec(name="count", fields={"limit"}, required={"limit"})],
        runners={"count": app.count},
        shutdown_grace=2.0,
    )
    async with open_runtime(config) as runtime:
        app.runtime = runtime
        # Your own actor, a child of the runtime's supervision tree.
        counter: LiveRef[Add | Total, int] = await runtime.supervisor.start_child(
            ChildSpec("counter", Counter)
        )
        log = runtime.eventlog
        with await log.subscribe() as port:
            receipts = [
                await log.submit("count", {"limit": limit}, request_id=f"count-{limit}")
                for limit in (1_000, 100_000)
            ]
            pending = {receipt.run_id for receipt in receipts}
            results: dict[int | None, Any] = {}
            async for item in port:
                if isinstance(item, Event) and item.run_id in pending:
                    if item.kind == "job_finished":
                        results[item.run_id] = item.data["result"]
                    if results.keys() == pending:
                        break
        for run_id, result in sorted(results.items()):
            print(run_id, result)
        print("finished runs:", await counter.ask(Total(), timeout=1.0))
        print([row.id for row in runtime.supervisor.which_children()])


if __name__ == "__main__":
    trio.run(main)
