"""Step 4: supervision: a crashing child is restarted, and its ref survives."""

import trio

from actors import (
    Actor,
    ActorCrashed,
    ChildSpec,
    LiveRef,
    Reply,
    Supervisor,
    SupervisorEvent,
)

from step3_actor import Add, Counter, Total


class Parser(Actor[str, int]):
    """Parses numbers; anything else crashes it (a bug, not an ``ActorError``)."""

    async def handle(self, message: str, reply: Reply[int]) -> None:
        reply.send(int(message))  # int("x") raises ValueError: the actor crashes


async def main() -> None:
    events: list[SupervisorEvent] = []
    sup = Supervisor(
        [
            ChildSpec("counter", Counter, restart="permanent", shutdown=1.0),
            ChildSpec("parser", Parser, restart="permanent", shutdown=1.0),
        ],
        strategy="one_for_one",  # a crash restarts that child only
        max_restarts=3,
        period=5.0,  # more than 3 restarts within 5 s and the supervisor gives up
        on_event=events.append,  # every decision, as it is taken
    )
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(sup.run)
        # A supervisor does not know its children's types: name them once.
        parser: LiveRef[str, int] = ref.child("parser")
        counter: LiveRef[Add | Total, int] = ref.child("counter")

        print(await parser.ask("41", timeout=1.0))
        try:
            await parser.ask("x", timeout=1.0)
        except ActorCrashed as error:
            print(error.code)
        # The same ref reaches the restarted parser: this ask waits for it.
        print(await parser.ask("42", timeout=1.0))
        print(await counter.ask(Add(amount=1), timeout=1.0))  # untouched by the crash

        # A child added at run time, supervised like the others.
        extra: LiveRef[Add | Total, int] = await ref.start_child(ChildSpec("extra", Counter))
        print(await extra.ask(Add(amount=7), timeout=1.0))
        for row in ref.which_children():
            print(row.id, row.state.value, row.restarts)
        print(ref.count_children())
        await ref.stop(grace=1.0)  # children in reverse start order

    for event in events:
        fields = (event.kind, event.child, event.incarnation, event.reason)
        print(*(field for field in fields if field not in ("", None)))


if __name__ == "__main__":
    trio.run(main)
