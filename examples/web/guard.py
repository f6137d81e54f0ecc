"""Who may use the front door: the Host, Origin and token checks (design §7.3).

A web page the user has open can make a websocket handshake to any address, and a
rebound DNS name can make the browser send a page's requests to 127.0.0.1; other users
of a shared machine reach 127.0.0.1 too. :class:`Guard` decides, from the request head
alone, before a websocket is opened:

1. **Host** (the DNS-rebinding defence), for websocket handshakes and plain HTTP alike,
   on a loopback bind only: the ``Host`` must be a loopback name or address
   (``localhost``, ``*.localhost``, ``127.0.0.1``, ``[::1]``) with one of the server's
   ports, or be listed in ``allowed_hosts``. On other binds the token protects.
2. **Origin**, for websocket handshakes: a handshake without ``Origin`` (a script, the
   command-line clients) passes; one with it passes only from the server's own origins
   (``http(s)://`` + the ``Host`` it was sent to, and on a loopback bind any loopback
   name with the server's port) or one listed in ``allowed_origins``.
3. **Token**, for websocket handshakes, when the config has one: ``?token=`` in the
   request target or ``Authorization: Bearer``, compared in constant time; when a
   request carries several (both, or a repeated ``?token=``), each must be right. An
   ``Authorization`` header given twice reaches the check as one value, its lines
   joined (:func:`~examples.web.httpconn.header_fields`): one wrong line refuses it.

A failed check is a :class:`Refusal`: an HTTP status, a reason for the logs and one
line for the client. The front door answers it and logs it (:mod:`examples.web.frontdoor`).
"""

from __future__ import annotations

import hmac
import urllib.parse
from typing import TYPE_CHECKING

import attrs

from .httpconn import reason_phrase
from .names import ANY, NULL_ORIGIN, is_loopback, parse_host, parse_origin

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .config import FrontDoorConfig

__all__ = ["Guard", "Refusal", "offered_token", "offered_tokens"]

#: Characters of a header value quoted back in a refusal (the rest is cut).
_QUOTE = 100


@attrs.frozen(kw_only=True)
class Refusal:
    """Why a request is refused: what the client is told and what the log says."""

    status: int
    """The HTTP status: 403 (host, origin, token), 429 (one address's limit), 503, or
    400 (a websocket upgrade after a plain request, :mod:`examples.web.plainhttp`)."""
    reason: str
    """A snake_case name for logs and statistics, e.g. ``foreign_origin``."""
    message: str
    """One line for the client, without the status."""

    @property
    def text(self) -> str:
        """The refusal's body: ``403 Forbidden: <message>`` and a newline."""
        return f"{self.status} {reason_phrase(self.status, 'Refused')}: {self.message}\n"


def _quote(value: str) -> str:
    return repr(value[:_QUOTE] + ("..." if len(value) > _QUOTE else ""))


def offered_token(target: str, headers: Mapping[bytes, bytes]) -> str | None:
    """The token a request carries: ``?token=`` in ``target``, else a Bearer credential."""
    offered = offered_tokens(target, headers)
    return offered[0] if offered else None


def offered_tokens(target: str, headers: Mapping[bytes, bytes]) -> list[str]:
    """Every token a request carries: each ``?token=`` of ``target``, then a Bearer
    credential (the token check wants each of them right)."""
    offered = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get("token", [])
    scheme, _, credentials = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        offered.append(credentials.strip())
    return offered


class Guard:
    """The Host, Origin and token checks of one serving front door; see the module doc.

    Args:
        config: The front door's settings (``host``, ``token``, ``allowed_hosts``,
            ``allowed_origins``).
        ports: The ports the front door listens on.
    """

    def __init__(self, config: FrontDoorConfig, ports: Iterable[int]) -> None:
        self.config = config
        self.ports = frozenset(ports)
        self.loopback = is_loopback(config.host)

    def check(
        self, target: str, headers: Mapping[bytes, bytes], *, websocket: bool
    ) -> Refusal | None:
        """The first failed check of a request (Host; then Origin and token for a
        websocket handshake), or None if it may go on.

        Args:
            target: The request target (path and query).
            headers: The request's headers, names lowercased.
            websocket: True for a websocket handshake, False for plain HTTP.
        """
        refusal = self.check_host(headers)
        if refusal is None and websocket:
            refusal = self.check_origin(headers) or self.check_token(target, headers)
        return refusal

    def check_host(self, headers: Mapping[bytes, bytes]) -> Refusal | None:
        """Refuse a ``Host`` that is not this server's on a loopback bind (DNS rebinding)."""
        allowed = self.config.allowed_hosts
        if not self.loopback or ANY in allowed:
            return None
        raw = headers.get(b"host", b"").decode("latin-1")
        host = parse_host(raw)
        if host is None:
            return Refusal(
                status=403,
                reason="foreign_host",
                message=f"bad or missing Host header {_quote(raw)}",
            )
        if str(host) in allowed or host.name in allowed:
            return None
        port = 80 if host.port is None else host.port
        if is_loopback(host.name) and port in self.ports:
            return None
        return Refusal(
            status=403,
            reason="foreign_host",
            message=f"Host {_quote(raw)} is not a loopback name of this server "
            "(a server exposed under another name needs --allow-host)",
        )

    def check_origin(self, headers: Mapping[bytes, bytes]) -> Refusal | None:
        """Refuse a handshake whose ``Origin`` is neither the server's own nor allowed."""
        value = headers.get(b"origin")
        if value is None:
            return None  # not a browser: scripts and the CLI clients send none
        origin = value.decode("latin-1").strip()
        allowed = self.config.allowed_origins
        if ANY in allowed or self._own_or_listed(origin, headers):
            return None
        return Refusal(
            status=403,
            reason="foreign_origin",
            message=f"origin {_quote(origin)} is not allowed (see --allow-origin)",
        )

    def _own_or_listed(self, origin: str, headers: Mapping[bytes, bytes]) -> bool:
        allowed = self.config.allowed_origins
        if origin.lower() == NULL_ORIGIN:
            return NULL_ORIGIN in allowed
        parsed = parse_origin(origin)
        if parsed is None:
            return False
        scheme, host = parsed
        if f"{scheme}://{host}" in allowed:
            return True
        if scheme not in ("http", "https"):
            return False
        target = parse_host(headers.get(b"host", b"").decode("latin-1"))
        if target is not None:  # same origin as the address the request was sent to
            port = target.port if target.port is not None else (443 if scheme == "https" else 80)
            if (target.name, port) == (host.name, host.port):
                return True
        return self.loopback and is_loopback(host.name) and host.port in self.ports

    def check_token(
        self, target: str, headers: Mapping[bytes, bytes], *, also: Iterable[str] = ()
    ) -> Refusal | None:
        """Refuse a request without the config's token (if it has one) or one of ``also``
        (the other tokens a route accepts)."""
        token = self.config.token
        if token is None:
            return None
        accepted = [token.encode(), *(other.encode() for other in also)]
        offered = offered_tokens(target, headers)
        # Every token given must be right: a wrong one beside a right one is refused.
        if offered and all(
            any([hmac.compare_digest(t.encode(), good) for good in accepted]) for t in offered
        ):
            return None
        return Refusal(
            status=403,
            reason="wrong_token" if offered else "missing_token",
            message="missing or wrong token; pass it as ?token=... or an "
            "'Authorization: Bearer ...' header",
        )
