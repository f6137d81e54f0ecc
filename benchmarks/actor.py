"""Actor core cost, as ratios against bare trio measured in the same run (design §1).

* **ask round trip** vs. a bare two-channel ping-pong: one task sends a request on a
  memory channel, another answers on a second channel (the least a request/reply over
  trio channels can cost). Target: ``ActorRef.ask`` <= 1.5x, with everything ask
  promises that the ping-pong does not (a per-ask deadline cancel scope, per-ask
  fencing of late replies, ActorStopped/ActorCrashed for askers of a dead actor);
* **send throughput** vs. ``MemorySendChannel.send`` to a task that only receives.

Run: ``python benchmarks/actor.py [--quick] [N]`` (N messages per measurement, default
20 000; ``--quick``: a smoke run of 2 000 messages and 3 rounds, noisier; quote a full run).
Each figure is the median of 5 interleaved rounds (each round measures every way once),
in wall time; the ratios are against the bare trio baselines of the same run.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import trio

from actors import Actor, Reply

QUICK = "--quick" in sys.argv
_ARGS = [arg for arg in sys.argv[1:] if arg != "--quick"]
N = int(_ARGS[0]) if _ARGS else 2_000 if QUICK else 20_000
ROUNDS = 3 if QUICK else 5
ASK_TARGET = 1.5


def verdict(value: float, target: float) -> str:
    """``OK`` or ``MISS``: the target line says plainly whether it was met."""
    return "OK" if value <= target else "MISS"


class Echo(Actor):
    mailbox_capacity = 16

    async def handle(self, message: Any, reply: Reply) -> None:
        reply.send(message)


class Sink(Actor):
    mailbox_capacity = 16

    async def handle(self, message: Any, reply: Reply) -> None:
        pass


async def bare_ping_pong() -> float:
    requests_send, requests_receive = trio.open_memory_channel[int](0)
    replies_send, replies_receive = trio.open_memory_channel[int](0)

    async def server() -> None:
        async for value in requests_receive:
            await replies_send.send(value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        start = time.perf_counter()
        for i in range(N):
            await requests_send.send(i)
            await replies_receive.receive()
        elapsed = time.perf_counter() - start
        await requests_send.aclose()
    return elapsed / N


async def actor_ask() -> float:
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(Echo().run)
        start = time.perf_counter()
        for i in range(N):
            await ref.ask(i, timeout=10)
        elapsed = time.perf_counter() - start
        await ref.stop(1)
    return elapsed / N


async def bare_send() -> float:
    send, receive = trio.open_memory_channel[int](16)

    async def drain() -> None:
        async for _ in receive:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        start = time.perf_counter()
        for i in range(N):
            await send.send(i)
        await send.aclose()
    return (time.perf_counter() - start) / N


async def actor_send() -> float:
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(Sink().run)
        start = time.perf_counter()
        for i in range(N):
            await ref.send(i)
        await ref.stop(10)  # includes draining what is still queued
    return (time.perf_counter() - start) / N


async def main() -> None:
    samples: dict[str, list[float]] = {"pingpong": [], "ask": [], "bare_send": [], "send": []}
    for _ in range(ROUNDS):
        samples["pingpong"].append(await bare_ping_pong())
        samples["ask"].append(await actor_ask())
        samples["bare_send"].append(await bare_send())
        samples["send"].append(await actor_send())
    median = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
    mode = "quick: fewer messages and rounds, noisier; quote a full run" if QUICK else "full"
    print(f"actor core ({mode}; {N} messages x {ROUNDS} rounds, medians)")
    ask_ratio = median["ask"] / median["pingpong"]
    print(
        f"ask round trip: bare two-channel ping-pong {median['pingpong']:.1f} us | "
        f"ActorRef.ask {median['ask']:.1f} us = {ask_ratio:.2f}x "
        f"(target <= {ASK_TARGET}x: {verdict(ask_ratio, ASK_TARGET)})"
    )
    print(
        f"send: bare channel send {median['bare_send']:.1f} us | "
        f"ActorRef.send {median['send']:.1f} us = {median['send'] / median['bare_send']:.2f}x"
    )


if __name__ == "__main__":
    trio.run(main)
