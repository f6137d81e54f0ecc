"""Step 1: run a function in a helper process, with a deadline."""

import trio

from actors import ActorError, HelperSpec, HelperTimeouts, open_helper_pool

from work import count_primes, sleep_forever


async def main() -> None:
    spec = HelperSpec(entry="actors.helper:serve_calls")  # helpers that run any function
    # A function cannot check for cancellation: give it 0.2 s to stop, then SIGTERM.
    timeouts = HelperTimeouts(cancel_grace=0.2)
    async with open_helper_pool(spec, size=2, timeouts=timeouts) as pool:
        print(await pool.run_sync(count_primes, 100_000))

        # A deadline on the call: past it, the helper is stopped (the cancel ladder).
        deadline = trio.current_time() + 0.5
        try:
            await pool.run_sync(sleep_forever, deadline=deadline)
        except ActorError as error:
            print(type(error).__name__, error.code, error.category)

        # The caller's own cancel scope works the same way: the call is stopped
        # before move_on_after returns, and the pool stays usable.
        with trio.move_on_after(0.5) as scope:
            await pool.run_sync(sleep_forever)
        print("gave up:", scope.cancelled_caught)
        print(await pool.run_sync(count_primes, 10))


if __name__ == "__main__":
    trio.run(main)
