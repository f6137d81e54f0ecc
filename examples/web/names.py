"""Host names, ``Host`` headers and origins, parsed and compared (design §7.3); pure.

The front door's Host and Origin checks (:mod:`examples.web.guard`) and its config's
``allowed_hosts``/``allowed_origins`` (:mod:`examples.web.config`) share these, so an
entry given on the command line and a header on the wire are read the same way:
names are lowercased, IPv6 literals lose their brackets, and an origin's port is
explicit (``http://localhost`` is ``http://localhost:80``).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

import attrs

__all__ = [
    "ANY",
    "NULL_ORIGIN",
    "HostPort",
    "is_loopback",
    "normalize_host_entry",
    "normalize_origin",
    "parse_host",
    "parse_origin",
]

#: In ``allowed_hosts``/``allowed_origins``: any value (turns the check off).
ANY = "*"
#: The ``Origin`` a browser sends for a ``file://`` page or a sandboxed frame.
NULL_ORIGIN = "null"
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_FORBIDDEN = frozenset("/?#@\\ \t\r\n")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")  # RFC 3986


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``*.localhost`` and loopback IP literals (127.0.0.0/8, ::1).

    Names ending in ``.localhost`` are loopback by RFC 6761 (browsers resolve them
    themselves, so DNS cannot rebind them).
    """
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # another name: assume it is reachable from outside


@attrs.frozen
class HostPort:
    """A host name (lowercase, IPv6 without brackets) and a port, or None if absent."""

    name: str
    port: int | None

    def __str__(self) -> str:
        name = f"[{self.name}]" if ":" in self.name else self.name
        return name if self.port is None else f"{name}:{self.port}"


def parse_host(text: str) -> HostPort | None:
    """Parse a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``), or None.

    None for anything else: empty, a path, credentials, spaces, a port that is not a
    number in 0..65535.
    """
    text = text.strip()
    if not text or _FORBIDDEN & set(text):
        return None
    try:
        parts = urllib.parse.urlsplit(f"//{text}")
        port = parts.port
    except ValueError:
        return None
    name = parts.hostname
    if not name:
        return None
    return HostPort(name.rstrip("."), port)


def parse_origin(text: str) -> tuple[str, HostPort] | None:
    """Parse an origin ``scheme://host[:port]`` into its scheme and host, or None.

    The port is made explicit for ``http``/``https``/``ws``/``wss``. None for ``null``
    and for anything that is not an origin (a path, a query, no host).
    """
    text = text.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return None
    host = parse_host(rest)
    if host is None:
        return None
    scheme = scheme.lower()
    if host.port is None and scheme in _DEFAULT_PORTS:
        host = HostPort(host.name, _DEFAULT_PORTS[scheme])
    return scheme, host


def normalize_origin(text: str) -> str:
    """The canonical form of an ``allowed_origins`` entry: ``scheme://host:port``.

    ``*`` (any origin) and ``null`` (``file://`` pages) are kept as they are.

    Raises:
        ValueError: not an origin; the message says what is expected.
    """
    if text in (ANY, NULL_ORIGIN):
        return text
    parsed = parse_origin(text) if isinstance(text, str) else None
    if parsed is None:
        raise ValueError(
            f"allowed_origins: {text!r} is not an origin (expected scheme://host[:port], "
            f"{NULL_ORIGIN!r} or {ANY!r})"
        )
    scheme, host = parsed
    return f"{scheme}://{host}"


def normalize_host_entry(text: str) -> str:
    """The canonical form of an ``allowed_hosts`` entry: ``name`` or ``name:port``.

    A name without a port allows it on every port; ``*`` allows any ``Host``.

    Raises:
        ValueError: not a host name with an optional port.
    """
    if text == ANY:
        return text
    parsed = parse_host(text) if isinstance(text, str) else None
    if parsed is None:
        raise ValueError(f"allowed_hosts: {text!r} is not a host name with an optional :port")
    return str(parsed)
