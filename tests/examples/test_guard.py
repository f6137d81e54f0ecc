"""The front door's Host, Origin and token decisions, as pure functions (design §7.3).

:mod:`examples.web.names` parses what a browser sends and what ``--allow-host`` /
``--allow-origin`` give; :class:`examples.web.guard.Guard` decides from a request head.
The same decisions over real sockets, for both servers: ``test_security.py``.
"""

from __future__ import annotations

import pytest

from examples.web.config import FrontDoorConfig
from examples.web.guard import Guard, offered_token
from examples.web.names import (
    HostPort,
    is_loopback,
    normalize_host_entry,
    normalize_origin,
    parse_host,
    parse_origin,
)

PORT = 8765


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8765", HostPort("127.0.0.1", 8765)),
        ("LocalHost:1", HostPort("localhost", 1)),
        ("localhost.:1", HostPort("localhost", 1)),
        ("[::1]:8765", HostPort("::1", 8765)),
        ("[::1]", HostPort("::1", None)),
        ("evil.example", HostPort("evil.example", None)),
        ("", None),
        ("a b:1", None),
        ("user@127.0.0.1:1", None),
        ("127.0.0.1:1/x", None),
        ("127.0.0.1:99999", None),
        ("127.0.0.1:port", None),
    ],
)
def test_parse_host(text: str, expected: HostPort | None) -> None:
    assert parse_host(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8765", ("http", HostPort("127.0.0.1", 8765))),
        ("HTTP://LOCALHOST", ("http", HostPort("localhost", 80))),
        ("https://lab.example", ("https", HostPort("lab.example", 443))),
        ("chrome-extension://abcdef", ("chrome-extension", HostPort("abcdef", None))),
        ("null", None),
        ("http://a/b", None),
        ("127.0.0.1:8765", None),
    ],
)
def test_parse_origin(text: str, expected: tuple[str, HostPort] | None) -> None:
    assert parse_origin(text) == expected


def test_loopback_names() -> None:
    for name in (
        "localhost",
        "LOCALHOST",
        "app.localhost",
        "127.0.0.1",
        "127.1.2.3",
        "::1",
        "[::1]",
    ):
        assert is_loopback(name), name
    for name in ("evil.example", "localhost.evil.example", "0.0.0.0", "10.0.0.1", "::"):
        assert not is_loopback(name), name


def test_allow_entries_are_normalized_or_refused_naming_the_field() -> None:
    assert normalize_origin("HTTP://Lab.Example") == "http://lab.example:80"
    assert normalize_origin("null") == "null"
    assert normalize_host_entry("Lab.Example:8080") == "lab.example:8080"
    config = FrontDoorConfig(allowed_origins=["https://[::1]:9"], allowed_hosts=["*"])
    assert config.allowed_origins == {"https://[::1]:9"}
    with pytest.raises(ValueError, match="allowed_origins: 'evil' is not an origin"):
        FrontDoorConfig(allowed_origins=["evil"])
    with pytest.raises(ValueError, match="allowed_origins must be a collection of strings"):
        FrontDoorConfig(allowed_origins="http://a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allowed_hosts: 'a/b' is not a host name"):
        FrontDoorConfig(allowed_hosts=["a/b"])
    with pytest.raises(ValueError, match="max_per_address must be >= 1"):
        FrontDoorConfig(max_per_address=0)


def _headers(host: str | None = f"127.0.0.1:{PORT}", origin: str | None = None, **more: str):
    headers = {b"host": host, b"origin": origin, **{k.encode(): v for k, v in more.items()}}
    return {name: value.encode() for name, value in headers.items() if value is not None}


def _reason(guard: Guard, target: str = "/", **headers: str | None) -> str | None:
    refusal = guard.check(target, _headers(**headers), websocket=True)
    return None if refusal is None else refusal.reason


def test_host_on_a_loopback_bind_must_be_a_loopback_name_with_the_port() -> None:
    guard = Guard(FrontDoorConfig(), [PORT])
    for host in (f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}", f"a.localhost:{PORT}"):
        assert _reason(guard, host=host) is None, host
    for host in (f"evil.example:{PORT}", "127.0.0.1", "127.0.0.1:1", None, "bad host"):
        assert _reason(guard, host=host) == "foreign_host", host
    refusal = guard.check("/", _headers(host=f"evil.example:{PORT}"), websocket=False)
    assert refusal is not None
    assert refusal.text == (
        f"403 Forbidden: Host 'evil.example:{PORT}' is not a loopback name of this server "
        "(a server exposed under another name needs --allow-host)\n"
    )


def test_allowed_hosts_and_a_non_loopback_bind() -> None:
    guard = Guard(FrontDoorConfig(allowed_hosts=["lab.example", "proxy:443"]), [PORT])
    assert _reason(guard, host="lab.example:1") is None  # a name alone: any port
    assert _reason(guard, host="proxy:443") is None
    assert _reason(guard, host="proxy:444") == "foreign_host"
    assert _reason(Guard(FrontDoorConfig(allowed_hosts=["*"]), [PORT]), host="x:1") is None
    # Off loopback the Host is not checked: the token protects.
    exposed = Guard(FrontDoorConfig(host="0.0.0.0", token="a-long-secret"), [PORT])
    assert _reason(exposed, "/?token=a-long-secret", host=f"evil.example:{PORT}") is None
    assert _reason(exposed, host=f"evil.example:{PORT}") == "missing_token"


def test_origin_must_be_the_servers_own_or_listed() -> None:
    guard = Guard(FrontDoorConfig(allowed_origins=["https://lab.example"]), [PORT])
    own = [f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}", f"http://[::1]:{PORT}"]
    for origin in [*own, "https://lab.example:443", None]:
        assert _reason(guard, origin=origin) is None, origin
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{PORT + 1}", "garbage"):
        assert _reason(guard, origin=origin) == "foreign_origin", origin
    # The page's own origin under an allowed Host name (a proxy) is the server's own.
    proxied = Guard(FrontDoorConfig(allowed_hosts=["lab.example"]), [PORT])
    assert _reason(proxied, host="lab.example", origin="http://lab.example") is None
    # A TLS proxy passes the Host without its port: the origin's scheme gives it.
    assert _reason(proxied, host="lab.example", origin="https://lab.example") is None
    assert _reason(proxied, host="lab.example", origin="https://lab.example:8443") == (
        "foreign_origin"
    )
    assert _reason(proxied, host="lab.example:80", origin="https://lab.example") == (
        "foreign_origin"
    )
    assert _reason(Guard(FrontDoorConfig(allowed_origins=["null"]), [PORT]), origin="null") is None
    assert _reason(Guard(FrontDoorConfig(allowed_origins=["*"]), [PORT]), origin="x://y") is None


def test_token_missing_wrong_or_right() -> None:
    guard = Guard(FrontDoorConfig(token="s3cret-token"), [PORT])
    assert _reason(guard) == "missing_token"
    assert _reason(guard, "/?token=wrong-token") == "wrong_token"
    assert _reason(guard, authorization="Bearer nope-nope") == "wrong_token"
    assert _reason(guard, "/?token=s3cret-token") is None
    assert _reason(guard, authorization="Bearer s3cret-token") is None
    # Both given: each must be right (a wrong one beside the right one is refused).
    assert _reason(guard, "/?token=s3cret-token", authorization="Bearer s3cret-token") is None
    assert _reason(guard, "/?token=s3cret-token", authorization="Bearer nope-nope") == "wrong_token"
    assert _reason(guard, "/?token=nope", authorization="Bearer s3cret-token") == "wrong_token"
    assert _reason(guard, "/?token=s3cret-token&token=nope") == "wrong_token"
    assert offered_token("/?a=1&token=t%20x", {}) == "t x"
    assert offered_token("/", {b"authorization": b"Basic abc"}) is None
    # A plain HTTP request (the public page) is not asked for the token.
    assert guard.check("/", _headers(), websocket=False) is None
