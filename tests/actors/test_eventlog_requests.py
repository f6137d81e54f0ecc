"""Each event-log request is declared once; every table that serves it derives from that.

Reads the declarations (:data:`actors._eventlog.REQUESTS`) and the tables built from
them: the actor's dispatch, the client's methods and the web API's handlers. Fails when
a request is missing from one, served twice, or spelled in more than one place.
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
    EventLog,
    EventLogActor,
    EventLogClient,
    Request,
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
        assert issubclass(message, Request)
        assert message.__module__ == "actors._eventlog._messages"
        assert spec.reply, message


def test_a_second_declaration_is_refused() -> None:
    @attrs.frozen
    class Again(Request[int]):
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


def test_the_web_api_serves_every_event_log_request_once() -> None:
    wire = {
        messages.TAGS[cls]
        for cls in get_args(messages.ClientRequest)
        if cls.__module__ == _eventlog_messages.__name__
    }
    assert set(api.BUILTIN_HANDLERS) == wire
    with pytest.raises(ValueError, match="has a built-in handler already"):
        api._serves(messages.Cancel)(api.cancel)
    # The tags come from the message classes, never from strings written again.
    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
            assert not keys & wire, f"request tags spelled again: {sorted(keys & wire)}"
