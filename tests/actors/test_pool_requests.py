"""The pool actor's requests are declared once (design §3, §1.7).

Reads the declarations (``actors._helpers._pool._requests``), the pool actor's dispatch
table and the handle's methods, and fails if a request is missing from one of them,
answered or sent by a hand-written copy, or spelled in two places.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors import PoolActor, PoolHandle
from actors._helpers._pool import _actor, _requests
from actors._helpers._pool._requests import POOL_REQUESTS, REQUESTS, handler_name

ACTORS = Path(_requests.__file__).resolve().parents[2]
#: The rooms that could send a pool request.
SENDERS = ("_helpers", "_runtime")
MESSAGES = {
    value
    for value in vars(_requests).values()
    if isinstance(value, type) and attrs.has(value) and value.__module__ == _requests.__name__
} - {_requests.PoolRequest}


def test_every_message_class_is_declared_once() -> None:
    declared = [request.message for request in POOL_REQUESTS]
    assert len(declared) == len(set(declared))
    assert set(declared) == MESSAGES
    assert set(REQUESTS) == MESSAGES


def test_the_actor_answers_each_request_through_the_table_only() -> None:
    assert set(_actor._HANDLERS) == MESSAGES
    for message, handler in _actor._HANDLERS.items():
        assert handler is getattr(PoolActor, handler_name(message))
    # No handler without a request, and no hand-written dispatch beside the table.
    handlers = {name for name in vars(PoolActor) if name.startswith("_on_")}
    assert handlers == {handler_name(message) for message in MESSAGES}
    assert "isinstance" not in inspect.getsource(PoolActor.handle)


def test_the_handle_methods_come_from_their_rows() -> None:
    clients = [request.client for request in POOL_REQUESTS if request.client is not None]
    assert len(clients) == len(set(clients))
    made = {
        name: value.request for name, value in vars(PoolHandle).items() if hasattr(value, "request")
    }
    assert made == {request.client: request for request in POOL_REQUESTS if request.client}
    for name, request in made.items():
        fields = [field.name for field in attrs.fields(request.message)]
        timeout = [] if request.timeout is None else ["timeout"]
        assert list(inspect.signature(getattr(PoolHandle, name)).parameters) == [
            "self",
            *fields,
            *timeout,
        ]
        assert request.summary in (getattr(PoolHandle, name).__doc__ or "")


def _constructions() -> set[tuple[str, str]]:
    names = {message.__name__ for message in MESSAGES}
    found = set()
    paths = [path for room in SENDERS for path in sorted((ACTORS / room).rglob("*.py"))]
    for path in [*paths, ACTORS / "__init__.py"]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in names
            ):
                found.add((node.func.id, path.relative_to(ACTORS.parent).as_posix()))
    return found


def test_no_request_is_built_by_hand_outside_its_declaration() -> None:
    # The one request a handle sends itself: the lease of its direct job path.
    assert _constructions() == {("GetLease", "actors/_helpers/_pool/_handle.py")}
    assert REQUESTS[_requests.GetLease].client is None


class _Ref:
    def __init__(self) -> None:
        self.asked: list[tuple[Any, float]] = []
        self.sent: list[Any] = []

    async def ask(self, message: Any, *, timeout: float) -> Any:  # noqa: ASYNC109
        self.asked.append((message, timeout))
        return "answer"

    def try_send(self, message: Any) -> None:
        self.sent.append(message)


class _Source:
    def __init__(self, ref: _Ref) -> None:
        self.ref = ref

    def current(self) -> Any:
        return self.ref

    async def wait(self, deadline: float, *, other_than: Any = None) -> Any:
        return self.ref


async def test_a_made_method_sends_its_message_with_the_rows_timeout() -> None:
    ref = _Ref()
    handle = PoolHandle(_Source(ref))
    assert await handle.cancel_job("j-1") == "answer"
    assert await handle.cancel_job(job_id="j-2", timeout=2.5) == "answer"
    assert await handle.restart() == "answer"
    handle.retire_idle()
    assert ref.asked == [
        (_requests.CancelJob(job_id="j-1"), 5.0),
        (_requests.CancelJob(job_id="j-2"), 2.5),
        (_requests.RestartPool(), 30.0),
    ]
    assert ref.sent == [_requests.RetireIdle()]


async def test_a_made_method_refuses_a_wrong_call_as_python_does() -> None:
    handle = PoolHandle(_Source(_Ref()))
    with pytest.raises(TypeError, match="job_id"):
        await handle.cancel_job()
    with pytest.raises(TypeError):
        await handle.snapshot("extra")
    with pytest.raises(TypeError):
        handle.retire_idle(timeout=1)
