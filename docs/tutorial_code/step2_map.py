"""Step 2: many items with map, a retry policy, and what the pool reports."""

import tempfile
from pathlib import Path

import trio

from actors import HelperSpec, RetryPolicy, open_helper_pool

from work import count_primes, crash_once


async def main() -> None:
    spec = HelperSpec(entry="actors.helper:serve_calls")
    async with open_helper_pool(spec, size=2) as pool:
        # At most two calls at once; the results come back in input order.
        limits = [10, 100, 1_000, 10_000, 100_000]
        print(await pool.map(count_primes, limits, limit=2))

        # A crash is transient: the policy tries again after a short backoff.
        retry = RetryPolicy(maximum_attempts=3, initial_interval=0.05, jitter=0.1)
        marker = str(Path(tempfile.mkdtemp()) / "crashed")
        with pool.events.subscribe(kinds={"reaped", "call_retried"}) as events:
            print(await pool.run_sync(crash_once, 12, marker, retry=retry))
            while (event := events.receive_nowait()) is not None:
                shown = ("exit_code", "code", "attempt")
                print(
                    event.kind, {key: event.details[key] for key in shown if key in event.details}
                )
        stats = pool.statistics()
        print(stats.jobs_started, stats.jobs_succeeded, stats.jobs_failed)


if __name__ == "__main__":
    trio.run(main)
