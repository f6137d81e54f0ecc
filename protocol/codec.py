"""The one strict converter of the client protocol, and JSON text in and out (design §2.1, §2.4).

:func:`make_converter` builds a private :class:`cattrs.Converter` (never the global
one) that structures and unstructures every class of :mod:`protocol.messages`, tagged by
a ``"type"`` key (:data:`protocol.messages.TAGS`). Structuring is **strict**:

* unknown keys, missing keys and mistyped values are errors (``forbid_extra_keys``);
* no coercion: ``"5"`` is not an int, ``true`` is not an int, ``1`` is not a string;
  an int is accepted where a float is expected (JSON has one number type);
* arrays must be JSON arrays (a string is not a tuple of characters);
* field validators (lengths, ranges, codes) run too.

Every offending field is named by its path (``$.run_ids[2]``) through
:func:`cattrs.transform_error`. Example::

    request = decode_client_message('{"type": "cancel", "request_id": "r1", "run_id": 7}')
    assert request == Cancel(request_id="r1", run_id=7)
    text = encode_message(ErrorReply.from_error(exc, request_id="r1"))
"""

from __future__ import annotations

import json
import typing
from typing import Any, Final, cast

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError, IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union
from cattrs.v import format_exception as cattrs_format_exception

from ._strict_json import SURROGATE_ESCAPE, encodes_as_utf8, loads
from .errors import InvalidMessage, MessageTooLarge, UnknownType
from .messages import ADDED_OPTIONAL, TAGS, ClientRequest, FieldError, Message, ServerMessage

__all__ = [
    "DEFAULT_MAX_MESSAGE",
    "DEFAULT_MAX_SERVER_MESSAGE",
    "decode_client_message",
    "decode_server_message",
    "encode_message",
    "make_converter",
    "structure_message",
    "unstructure_message",
]

#: Default limit on a client → server message, in bytes of UTF-8 (design §2.4).
DEFAULT_MAX_MESSAGE: Final = 64 * 1024
#: Default limit on a server → client message, in bytes (a large run list or snapshot).
DEFAULT_MAX_SERVER_MESSAGE: Final = 4 * 1024 * 1024
#: Most field paths listed in :class:`InvalidMessage` ``details["fields"]``.
MAX_REPORTED_FIELDS: Final = 32

_TAG: Final = "type"
_CLIENT_TAGS: Final = {TAGS[cls]: cls for cls in typing.get_args(ClientRequest)}
_SERVER_TAGS: Final = {TAGS[cls]: cls for cls in typing.get_args(ServerMessage)}
_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# --- strict primitive hooks -----------------------------------------------------------


def _structure_int(value: object, _: type) -> int:
    if type(value) is not int:  # bool is a subclass of int: refuse it
        raise TypeError(f"expected int, got {_json_name(value)}")
    return value


def _structure_float(value: object, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected number, got {_json_name(value)}")
    return float(value)


def _structure_str(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected string, got {_json_name(value)}")
    return value


def _structure_bool(value: object, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected boolean, got {_json_name(value)}")
    return value


def _json_name(value: object) -> str:
    names = {bool: "boolean", int: "int", float: "number", str: "string", list: "array"}
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return names.get(type(value), type(value).__name__)


def _is_var_tuple(typ: Any) -> bool:
    args = typing.get_args(typ)
    return typing.get_origin(typ) is tuple and len(args) == 2 and args[1] is Ellipsis


def _var_tuple_hook_factory(typ: Any, converter: cattrs.Converter) -> Any:
    item_type = typing.get_args(typ)[0]
    item_hook = converter.get_structure_hook(item_type)

    def structure_tuple(value: object, _: type) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected array, got {_json_name(value)}")
        items: list[Any] = []
        errors: list[Exception] = []
        for index, item in enumerate(value):
            try:
                items.append(item_hook(item, item_type))
            except Exception as exc:  # collected and re-raised below, with its index
                exc.add_note(IterableValidationNote(f"@ index {index}", index, item_type))
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {typ!r}", errors, typ)
        return tuple(items)

    return structure_tuple


def make_converter() -> cattrs.Converter:
    """Build the strict converter for every client-protocol message (design §2.1).

    A fresh :class:`cattrs.Converter` with ``forbid_extra_keys=True`` and detailed
    validation; strict ``int``/``float``/``str``/``bool`` hooks (no coercion, bools are
    not ints); ``tuple[X, ...]`` only from JSON arrays; and tagged unions
    (``tag_name="type"``) for :data:`ClientRequest`, :data:`ServerMessage` and
    :data:`Message`. Optional fields added after the first release
    (marked ``ADDED_OPTIONAL`` in their metadata, e.g. ``retry_after``) are left out of the
    JSON while ``None``. The module keeps one for its functions; build your own only to
    extend it.

    Returns:
        The converter. Unstructure with ``unstructure_as=Message`` to get the tag.
    """
    converter = _members_converter()
    for union in _UNIONS:
        _configure_union(converter, union)
    return converter


#: The tagged unions, in the order :func:`make_converter` configures them.
_UNIONS: Final = (ClientRequest, ServerMessage, Message)


def _members_converter() -> cattrs.Converter:
    # Every hook of make_converter() but the unions'.
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook_factory(_is_var_tuple, _var_tuple_hook_factory)
    for cls in TAGS:  # fields added later are left out while None (stable wire form)
        added = [f.name for f in attrs.fields(cls) if f.metadata.get(ADDED_OPTIONAL)]
        if added:
            overrides: dict[str, Any] = {name: override(omit_if_default=True) for name in added}
            converter.register_unstructure_hook(
                cls, make_dict_unstructure_fn(cls, converter, **overrides)
            )
    return converter


def _configure_union(converter: cattrs.Converter, union: Any) -> None:
    # A union captures each member's hooks now, so the primitive hooks come first.
    configure_tagged_union(union, converter, tag_generator=TAGS.__getitem__, tag_name=_TAG)


#: The module's converter: make_converter()'s hooks, the requests' union at once (a
#: server's first request is not delayed), the other unions on their first structure
#: (:func:`_union_converter`). Configuring one generates the structuring code of all its
#: members, which a process that never decodes them (a server never reads a server
#: message) need not pay for at start-up.
_CONVERTER: Final = _members_converter()
_configure_union(_CONVERTER, ClientRequest)
_CONFIGURED: Final[set[Any]] = {ClientRequest}


def _union_converter(union: Any) -> cattrs.Converter:
    if union not in _CONFIGURED:
        _configure_union(_CONVERTER, union)
        _CONFIGURED.add(union)
    return _CONVERTER


# --- encoding -------------------------------------------------------------------------


def unstructure_message(msg: Message) -> dict[str, Any]:
    """Return ``msg`` as a JSON-compatible dict with its ``"type"`` tag (design §2.1).

    Raises:
        TypeError: ``msg`` is not an instance of a class of :mod:`protocol.messages`.
    """
    if type(msg) not in TAGS:
        raise TypeError(f"not a protocol message: {type(msg).__name__}")
    # The member's own hook plus its tag: what the Message union's hook gives.
    fields: dict[str, Any] = _CONVERTER.unstructure(msg)
    fields.pop(_TAG, None)
    return {_TAG: TAGS[type(msg)], **fields}  # the tag first: easier to read in logs and traces


def encode_message(msg: Message) -> str:
    """Return ``msg`` as compact JSON text (no spaces), ready for a websocket text frame.

    Non-ASCII characters are written as UTF-8, not escaped.

    Raises:
        TypeError: ``msg`` is not a protocol message, or a JSON-object field holds a
            value JSON cannot represent (e.g. a set).
        ValueError: a JSON-object field holds NaN or an infinity.
    """
    return _encoder.encode(unstructure_message(msg))


# --- decoding -------------------------------------------------------------------------


def decode_client_message(
    data: str | bytes, *, max_size: int = DEFAULT_MAX_MESSAGE
) -> ClientRequest:
    """Parse and strictly structure one client → server request (design §2.4).

    Args:
        data: One websocket message: JSON text (``str``) or UTF-8 bytes.
        max_size: Largest accepted message, in bytes of UTF-8 (default 64 KiB). It is
            checked before parsing.

    Returns:
        The request, an instance of one of the :data:`ClientRequest` classes.

    Raises:
        MessageTooLarge: (code ``message_too_large``) ``data`` is over ``max_size``
            bytes; ``details`` has ``limit`` (bytes), and ``size`` (bytes) when ``data``
            is bytes. Nothing was parsed.
        UnknownType: (code ``unknown_type``) ``type`` is not a request's tag
            (server messages included); ``details`` has ``type`` and ``fields``.
        InvalidMessage: (code ``invalid_message``) not UTF-8 (or a lone surrogate,
            raw or escaped), malformed JSON (the message gives line and column; a
            duplicate key or a number overflowing a double included), not a JSON
            object, a missing or non-string
            ``type``, or unknown / missing / mistyped / invalid fields. The message names
            every offending field path and ``details["fields"]`` lists them (at most 32).
    """
    # ``union=ClientRequest`` admits only its tags, so the message is one of them.
    return cast("ClientRequest", structure_message(_parse(data, max_size), ClientRequest))


def decode_server_message(
    data: str | bytes, *, max_size: int = DEFAULT_MAX_SERVER_MESSAGE
) -> ServerMessage:
    """Parse and strictly structure one server → client message (for clients and tests).

    Args:
        data: One websocket message: JSON text or UTF-8 bytes.
        max_size: Largest accepted message, in bytes (default 4 MiB).

    Returns:
        The message, an instance of one of the :data:`ServerMessage` classes.

    Raises:
        MessageTooLarge: (code ``message_too_large``) as for :func:`decode_client_message`.
        UnknownType: (code ``unknown_type``) ``type`` is not a server message's tag.
        InvalidMessage: (code ``invalid_message``) as for :func:`decode_client_message`.
    """
    # ``union=ServerMessage`` admits only its tags, so the message is one of them.
    return cast("ServerMessage", structure_message(_parse(data, max_size), ServerMessage))


def structure_message(obj: object, union: Any = Message) -> Message:
    """Strictly structure an already-parsed JSON value as one message (design §2.1).

    Args:
        obj: The parsed JSON value (it should be a dict with a ``"type"`` key).
        union: :data:`ClientRequest`, :data:`ServerMessage` or :data:`Message` (default):
            which tags are accepted.

    Returns:
        The message.

    Raises:
        UnknownType: (code ``unknown_type``) the tag is not one of ``union``'s.
        InvalidMessage: (code ``invalid_message``) ``obj`` is not an object, has no
            string ``type``, or its fields do not structure; fields named as above.
    """
    if not isinstance(obj, dict):
        raise InvalidMessage(
            f"a message must be a JSON object, got {_json_name(obj)}", fields=["$"]
        )
    tag = obj.get(_TAG)
    if not isinstance(tag, str):
        reason = "is missing" if _TAG not in obj else f"must be a string, got {_json_name(tag)}"
        raise InvalidMessage(f"$.{_TAG}: the message type {reason}", fields=[f"$.{_TAG}"])
    accepted = _accepted_tags(union)
    if tag not in accepted:
        raise UnknownType(
            f"$.{_TAG}: unknown message type {tag[:64]!r}; expected one of "
            f"{', '.join(sorted(accepted))}",
            fields=[f"$.{_TAG}"],
            type=tag[:128],
        )
    try:
        result: Message = _union_converter(union).structure(obj, union)
    except Exception as exc:  # cattrs wraps every field error; we name them all
        problems = _describe(exc)
        fields = [path for path, _ in problems][:MAX_REPORTED_FIELDS]
        text = "; ".join(f"{path}: {reason}" for path, reason in problems[:MAX_REPORTED_FIELDS])
        raise InvalidMessage(f"invalid {tag} message: {text}", fields=fields, type=tag) from None
    return result


def _accepted_tags(union: Any) -> dict[str, type]:
    if union is ClientRequest:
        return _CLIENT_TAGS
    if union is ServerMessage:
        return _SERVER_TAGS
    return {**_CLIENT_TAGS, **_SERVER_TAGS}


def _parse(data: str | bytes, max_size: int) -> Any:
    if isinstance(data, str):
        # Each character is 1..4 bytes of UTF-8: count characters first, so a huge
        # string is refused without encoding it.
        if len(data) > max_size:
            raise MessageTooLarge(
                f"message is larger than the limit of {max_size} bytes", limit=max_size
            )
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidMessage(
                "message is not valid Unicode: it holds a lone surrogate", fields=["$"]
            ) from None
        if size > max_size:
            raise MessageTooLarge(
                f"message is {size} bytes, over the limit of {max_size} bytes",
                limit=max_size,
                size=size,
            )
        text = data
    elif isinstance(data, bytes | bytearray | memoryview):
        size = memoryview(data).nbytes
        if size > max_size:
            raise MessageTooLarge(
                f"message is {size} bytes, over the limit of {max_size} bytes",
                limit=max_size,
                size=size,
            )
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidMessage(f"message is not UTF-8: {exc.reason}", fields=["$"]) from None
    else:
        raise TypeError(f"data must be str or bytes, got {type(data).__name__}")
    try:
        obj = loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidMessage(
            f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", fields=["$"]
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InvalidMessage(f"malformed JSON: {exc}"[:200], fields=["$"]) from None
    if SURROGATE_ESCAPE.search(text) and not encodes_as_utf8(obj):
        # Valid JSON text, but a string in it is not Unicode: it could never be
        # written back out as UTF-8 (an echoed request_id would break the connection).
        raise InvalidMessage(
            "message is not valid Unicode: it holds a lone surrogate escape", fields=["$"]
        )
    return obj


# --- error paths ----------------------------------------------------------------------


def _describe(exc: Exception) -> list[tuple[str, str]]:
    """Return ``(path, reason)`` for every problem in a cattrs structuring error.

    The walk and the paths are :func:`cattrs.transform_error`'s; our formatter records
    each leaf exception it sees, in order, so that two kinds of leaf get a precise path:
    a validator's :class:`FieldError` (cattrs reports it at the class, we add the field)
    and an unknown-keys error (one path per unknown key).
    """
    leaves: list[BaseException] = []

    def format_exception(leaf: BaseException, typ: type | None) -> str:
        leaves.append(leaf)
        return _reason(leaf, typ)

    lines = cattrs.transform_error(exc, format_exception=format_exception)
    problems: list[tuple[str, str]] = []
    for line, leaf in zip(lines, leaves, strict=True):
        reason, _, path = line.rpartition(" @ ")
        if isinstance(leaf, FieldError):
            problems.append((f"{path}.{leaf.field}", reason))
        elif isinstance(leaf, ForbiddenExtraKeysError):
            problems.extend((f"{path}.{key}", reason) for key in sorted(leaf.extra_fields))
        else:
            problems.append((path, reason))
    return problems


def _reason(leaf: BaseException, typ: type | None) -> str:
    if isinstance(leaf, FieldError):
        return leaf.reason
    if isinstance(leaf, ForbiddenExtraKeysError):
        return "unknown field"
    if isinstance(leaf, KeyError):
        return "required field missing"
    if isinstance(leaf, AttributeError) and "items" in str(leaf):
        return "expected object"
    if isinstance(leaf, TypeError | ValueError):
        return str(leaf)[:200]
    return cattrs_format_exception(leaf, typ)
