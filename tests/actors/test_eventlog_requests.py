"""Each event-log request is declared once; every table that serves it derives from that.

Reads the declarations (:data:`actors._eventlog.REQUESTS`, with their wire forms in
:data:`actors.WIRE_FORMS`) and the tables built from them: the actor's dispatch, the
client's methods and the web API's handlers. Fails when a request is missing from one,
served twice, or spelled in more than one place (a handler written by hand for a
declared request, a wire message no declaration names, a wire field no request field
takes).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest

from actors._eventlog import (
    REQUESTS,
    WIRE_FORMS,
    Cancel,
    EventLog,
    EventLogActor,
    EventLogClient,
    EventLogRequest,
    Status,
    Submit,
    Watch,
    WireForm,
)
from actors._eventlog._messages import request
from examples.web import api
from protocol import _eventlog_messages, messages

ROOT = Path(__file__).resolve().parents[2]


def _fields(message: type[Any]) -> list[str]:
    return [field.name for field in attrs.fields(message)]


def test_every_request_is_declared_once_with_its_reply() -> None:
    assert REQUESTS, "no request is declared"
    methods = [spec.method for spec in REQUESTS.values()]
    assert len(methods) == len(set(methods))
    for message, spec in REQUESTS.items():
        assert spec.message is message
        assert issubclass(message, EventLogRequest)
        assert message.__module__ == "actors._eventlog._messages"
        assert spec.reply, message


def test_a_second_declaration_is_refused() -> None:
    @attrs.frozen
    class Again(EventLogRequest[int]):
        pass

    with pytest.raises(ValueError, match="declared twice"):
        request("cancel")(Again)
    with pytest.raises(ValueError, match="declared twice"):
        request("something_new")(next(iter(REQUESTS)))
    assert Again not in REQUESTS


def test_no_other_module_of_the_room_defines_a_request_class() -> None:
    names = {message.__name__ for message in REQUESTS}
    for path in sorted((ROOT / "actors" / "_eventlog").rglob("*.py")):
        if path.name == "_messages.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        assert not defined & names, f"{path} defines {sorted(defined & names)} again"


def test_the_actor_serves_every_request_from_the_declaration() -> None:
    servers = EventLogActor._SERVERS
    assert set(servers) <= set(REQUESTS), "a server for an undeclared request"
    for message, spec in REQUESTS.items():
        method = getattr(EventLog, spec.method, None)
        assert callable(method), f"EventLog has no {spec.method} for {message.__name__}"
        if message in servers:
            continue
        # Served by calling the method with the message's fields as keywords.
        inspect.signature(method).bind(None, **dict.fromkeys(_fields(message)))
    source = inspect.getsource(EventLogActor.handle)
    for message in REQUESTS:  # no hand-written branch per request in the dispatch
        assert f"{message.__name__}(" not in source, message


def test_the_client_has_one_derived_method_per_request() -> None:
    derived: dict[type[Any], str] = {}
    for name, value in vars(EventLogClient).items():
        message = getattr(value, "__request__", None)
        if message is not None:
            assert message not in derived, f"{message.__name__} is asked twice"
            derived[message] = name
    assert derived == {message: spec.method for message, spec in REQUESTS.items()}
    for message, spec in REQUESTS.items():
        signature = inspect.signature(getattr(EventLogClient, spec.method))
        assert list(signature.parameters)[1:] == _fields(message)
        assert signature.return_annotation == spec.reply


#: The wire requests a connection serves itself, not one event-log request each:
#: ``subscribe`` pages ``watch`` then opens a port; ``unsubscribe`` and ``ack`` are the
#: port's. Adding one here is a decision a reviewer sees.
CONNECTION_REQUESTS = {messages.Subscribe, messages.Unsubscribe, messages.Ack}


def _wire_requests() -> set[type[Any]]:
    return {
        cls
        for cls in get_args(messages.ClientRequest)
        if cls.__module__ == _eventlog_messages.__name__
    }


def test_every_wire_request_is_the_wire_form_of_one_declaration() -> None:
    assert not set(WIRE_FORMS) & CONNECTION_REQUESTS
    assert set(WIRE_FORMS) | CONNECTION_REQUESTS == _wire_requests()
    for wire, spec in WIRE_FORMS.items():
        form = spec.wire
        assert form is not None
        assert form.message is wire
        assert form.reply in get_args(messages.ServerMessage), form.reply
        fields, wire_fields = set(_fields(spec.message)), set(_fields(wire))
        # Every wire field is taken by one request field (the client's own message id
        # aside), and every request field is filled or keeps a default: the fields are
        # the request's, never a second list of them.
        taken = {form.rename.get(name, name) for name in wire_fields}
        assert wire_fields - {"request_id"} <= set(form.rename) | fields, wire.__name__
        filled = (taken & fields) | {form.caller, form.page}
        for field in attrs.fields(spec.message):
            assert field.name in filled or field.default is not attrs.NOTHING, (
                f"{spec.message.__name__}.{field.name} is filled by no wire field"
            )


def test_a_wire_message_is_declared_once_and_names_real_fields() -> None:
    @attrs.frozen
    class Again(EventLogRequest[int]):
        run_id: int

    with pytest.raises(ValueError, match="declared twice"):
        request("again", wire=WireForm(message=messages.Cancel, reply=messages.StatusReply))(Again)
    with pytest.raises(ValueError, match="has no field"):
        request("again", wire=WireForm(message=messages.Ack, reply=messages.OkReply, caller="x"))(
            Again
        )
    assert Again not in REQUESTS


def test_a_wire_message_becomes_its_request() -> None:
    def asked(wire: Any) -> Any:
        spec = WIRE_FORMS[type(wire)]
        return spec.message(**spec.wire_arguments(wire, caller="ws-1@peer", page=50))

    assert asked(messages.Cancel(request_id="c", run_id=3, waiter="w")) == Cancel(
        3, "ws-1@peer", request_id="w"
    )
    assert asked(messages.Status(request_id="s", run_id=3)) == Status(3)
    assert asked(messages.Submit(request_id="r", operation="op", arguments={"a": 1})) == (
        Submit("op", {"a": 1}, "r", actor="ws-1@peer")
    )
    assert asked(messages.Watch(request_id="w", cursor=7)) == Watch(7, limit=50)
    with pytest.raises(ValueError, match="not sent over the websocket"):
        next(spec for spec in REQUESTS.values() if spec.wire is None).wire_arguments(
            None, caller="", page=0
        )


def test_the_web_api_serves_every_event_log_request_once() -> None:
    wire = {messages.TAGS[cls] for cls in _wire_requests()}
    assert set(api.BUILTIN_HANDLERS) == wire
    # The handlers of declared requests are made from their declarations ...
    for message, spec in WIRE_FORMS.items():
        handler = api.BUILTIN_HANDLERS[messages.TAGS[message]]
        assert getattr(handler, "__request__", None) is spec, message.__name__
        assert spec.wire is not None
        assert (spec.answer, spec.wire.reply) in api._ANSWERS
    with pytest.raises(ValueError, match="has a built-in handler already"):
        api._serves(messages.Cancel)(api.BUILTIN_HANDLERS["cancel"])
    # ... and none is written by hand: no function of the module takes one.
    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    declared = {message.__name__ for message in WIRE_FORMS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):  # the tags come from the message classes
            keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
            assert not keys & wire, f"request tags spelled again: {sorted(keys & wire)}"
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            named = {
                sub.attr
                for sub in ast.walk(node)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "messages"
                and sub.attr in declared
                and sub in _annotations_and_decorators(node)
            }
            assert not named, f"{node.name} serves {sorted(named)} by hand"


def _annotations_and_decorators(node: ast.AsyncFunctionDef | ast.FunctionDef) -> set[ast.AST]:
    roots: list[ast.AST] = [*node.decorator_list]
    roots += [arg.annotation for arg in node.args.args if arg.annotation is not None]
    return {sub for root in roots for sub in ast.walk(root)}
