"""Step 3: an actor of your own, typed, asked with a timeout."""

from typing import assert_type

import attrs
import trio

from actors import Actor, ActorRef, AskTimeout, Reply


@attrs.frozen
class Add:
    amount: int


@attrs.frozen
class Total:
    pass


class Counter(Actor[Add | Total, int]):
    """Accepts ``Add`` and ``Total``; answers with an ``int``."""

    mailbox_capacity = 16  # bounded: a full mailbox makes senders wait

    def __init__(self) -> None:
        self.total = 0

    async def handle(self, message: Add | Total, reply: Reply[int]) -> None:
        if isinstance(message, Add):
            self.total += message.amount
        reply.send(self.total)  # the answer to an ask; a send ignores it


class Slow(Actor[str, str]):
    async def handle(self, message: str, reply: Reply[str]) -> None:
        await trio.sleep(10)
        reply.send(message)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        # nursery.start returns once the mailbox is live; trio types its result Any,
        # so name the ref's type once and mypy checks every use of it.
        counter: ActorRef[Add | Total, int] = await nursery.start(Counter().run)
        await counter.send(Add(amount=2))
        total = await counter.ask(Add(amount=3), timeout=1.0)
        assert_type(total, int)  # mypy knows what comes back
        print("total", total)

        slow: ActorRef[str, str] = await nursery.start(Slow().run)
        try:
            await slow.ask("hello", timeout=0.1)
        except AskTimeout as error:
            print(error.code, error.category)

        await counter.stop(grace=1.0)
        await slow.stop(grace=0.1)


if __name__ == "__main__":
    trio.run(main)
