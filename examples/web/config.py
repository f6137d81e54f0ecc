"""The websocket front door's settings and counters (design §1.6, §7.1, §7.3); data only.

:class:`FrontDoorConfig` is validated at construction; :mod:`examples.web.frontdoor`
re-exports both classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from actors import Backoff, count_field, duration_field
from protocol.codec import DEFAULT_MAX_MESSAGE

from .names import is_loopback, normalize_host_entry, normalize_origin

__all__ = ["FrontDoorConfig", "FrontDoorStatistics", "is_loopback"]


def _entries(field: str, value: object, normalize: Callable[[str], str]) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"{field} must be a collection of strings, got {value!r}")
    return frozenset(normalize(item) for item in value)


def _origins(value: object) -> frozenset[str]:
    """``allowed_origins`` in canonical form (:func:`~examples.web.names.normalize_origin`)."""
    return _entries("allowed_origins", value, normalize_origin)


def _hosts(value: object) -> frozenset[str]:
    """``allowed_hosts`` in canonical form (:func:`~examples.web.names.normalize_host_entry`)."""
    return _entries("allowed_hosts", value, normalize_host_entry)


def _check_token(instance: FrontDoorConfig, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        if not is_loopback(instance.host):
            raise ValueError(f"binding {instance.host!r} (not loopback) requires a token")
        return
    if not isinstance(value, str) or not 8 <= len(value) <= 256 or not value.isprintable():
        raise ValueError("token must be a printable str of 8..256 characters")


def _check_metrics_token(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (
        not isinstance(value, str) or not 8 <= len(value) <= 256 or not value.isprintable()
    ):
        raise ValueError("metrics_token must be a printable str of 8..256 characters")


def _check_metrics_open(
    instance: FrontDoorConfig, attribute: attrs.Attribute[Any], value: object
) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"metrics_open must be a bool, got {value!r}")
    if value and not is_loopback(instance.host):
        raise ValueError(f"metrics_open: binding {instance.host!r} (not loopback) needs a token")


def _check_host(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"host must be a non-empty str, got {value!r}")


@attrs.frozen(kw_only=True)
class FrontDoorConfig:
    """Where and how the front door listens; validated at construction (design §1.6, §7.1).

    Raises:
        ValueError: a field is out of range (the message names it), or ``host`` is not
            loopback and no ``token`` is given.
    """

    host: str = attrs.field(default="127.0.0.1", validator=_check_host)
    """Interface to bind; anything but loopback requires ``token``."""
    port: int = count_field(0, maximum=65535)
    """TCP port; 0 picks a free one (see :attr:`FrontDoor.port`)."""
    token: str | None = attrs.field(default=None, validator=_check_token)
    """Shared secret every handshake must carry (``?token=`` or ``Authorization: Bearer``);
    None (loopback only): no token needed."""
    metrics_token: str | None = attrs.field(default=None, validator=_check_metrics_token)
    """Another token ``/metrics`` accepts besides :attr:`token`: a scraper's, which opens
    nothing else (design §7.8)."""
    metrics_open: bool = attrs.field(default=False, validator=_check_metrics_open)
    """True (loopback binds only): ``/metrics`` needs no token, for a scraper on this
    machine; every other route still does."""
    allowed_origins: frozenset[str] = attrs.field(factory=frozenset, converter=_origins)
    """Origins a websocket handshake may come from besides the server's own (the page it
    serves, on every name it answers to), as ``scheme://host[:port]``; ``"null"`` allows
    ``file://`` pages (and sandboxed frames), ``"*"`` any origin. Others: HTTP 403."""
    allowed_hosts: frozenset[str] = attrs.field(factory=frozenset, converter=_hosts)
    """``Host`` values accepted besides loopback names with the server's port, on a
    loopback bind (``name`` for any port, ``name:port``, ``"*"`` for any). Others: HTTP
    403 (the DNS-rebinding defence). Not checked on other binds: the token protects."""
    max_connections: int = count_field(64, minimum=1, maximum=10_000)
    """Clients at once; more are refused with HTTP 503."""
    max_per_address: int = count_field(16, minimum=1, maximum=10_000)
    """Clients at once from one IP address (never more than ``max_connections``); more
    are refused with HTTP 429, so one client cannot take every slot."""
    max_pending: int = count_field(128, minimum=1, maximum=10_000)
    """Connections at once that have not sent a complete first request head (a plain
    HTTP request or a websocket handshake) since they were accepted; they hold no slot,
    only a descriptor, for ``handshake_timeout`` seconds at most. When one more is
    accepted, the one pending longest is closed (a real client sends its head within
    milliseconds; design §7.3). Keep it above ``max_connections``, so that clients that
    all connect at once are all read."""
    accept_backoff: Backoff = attrs.field(
        factory=lambda: Backoff(base=0.05, cap=2.0, reset_after=1.0),
        validator=attrs.validators.instance_of(Backoff),
    )
    """Delays (seconds, trio clock) between attempts while ``accept()`` fails for want of
    file descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM); such an episode is over
    (and logged so) after ``reset_after`` seconds without a failure."""
    max_message: int = count_field(DEFAULT_MAX_MESSAGE, minimum=1024, maximum=1 << 20)
    """Largest client message answered normally, in bytes (design §2.4): larger ones get
    ``message_too_large``."""
    max_frame: int = count_field(1 << 20, minimum=1024, maximum=16 << 20)
    """Largest websocket message read at all, in bytes: above it the connection is
    closed (code 1009) by trio-websocket."""
    receive_queue: int = count_field(1, minimum=1, maximum=1024)
    """Client messages trio-websocket buffers per connection before it stops reading (so
    at most about ``(receive_queue + 1) * max_frame`` bytes per client)."""
    send_queue: int = count_field(32, minimum=1, maximum=4096)
    """Bound of each client's send queue, in messages (design §6.9)."""
    subscriber_bound: int = count_field(256, minimum=1, maximum=65_536)
    """Bound of each client's event-log port, in events; past it: ``resync_required``."""
    watch_limit: int = count_field(256, minimum=1, maximum=4096)
    """Most events in one ``events`` answer (``watch``, ``subscribe`` backlog)."""
    socket_send_buffer: int | None = attrs.field(default=None)
    """``SO_SNDBUF`` of accepted sockets in bytes (the kernel may double it), or None for
    the system's default: a small one detects a stalled client sooner."""
    push_timeout: float = duration_field(1.0)
    """Seconds (trio clock) a message for a client waits for room in its full send queue
    (a push of :meth:`Connection.push`, a pushed event, an answer) before the client is
    dropped for falling behind (``resync_required``, then close 4000; design §7.4)."""
    request_timeout: float = duration_field(30.0, allow_zero=False)
    """Seconds (trio clock) one request's handler may take: past them it is cancelled
    and the client is answered ``request_timeout`` (retryable); the connection goes on."""
    handshake_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) a client has to complete the opening handshake, or a plain
    HTTP request and its answer (:mod:`examples.web.plainhttp`): the first one from the
    moment the connection is accepted, a later one on a kept-alive connection from its
    first byte."""
    keepalive_timeout: float = duration_field(5.0, allow_zero=False, maximum=300.0)
    """Seconds (trio clock) a kept-alive plain HTTP connection waits for the client's
    next request after an answer; then the server closes it."""
    keepalive_requests: int = count_field(1000, minimum=1, maximum=100_000)
    """Most plain HTTP requests one connection carries: the last answer says
    ``Connection: close`` (1: every answer closes its connection)."""
    max_request_head: int = count_field(16 * 1024, minimum=1024, maximum=1 << 20)
    """Largest request head (request line and headers) read, in bytes: above it a
    client gets HTTP 431 and is closed."""
    max_route_body: int = count_field(8 << 20, minimum=1024, maximum=256 << 20)
    """Largest body a dynamic route (:mod:`examples.web.routes`) may send, in bytes:
    a larger one is answered with 500 instead and logged."""
    close_timeout: float = duration_field(0.5, allow_zero=False)
    """Seconds (trio clock) the closing handshake of one client may take, and the message
    being sent when a close comes may take to finish."""
    send_timeout: float = duration_field(30.0, allow_zero=False)
    """Seconds (trio clock) one message may take to send: a client that cannot take it
    in that time is dropped for falling behind (``resync_required``, then close 4000;
    design §7.4), the message being finished first within ``drop_timeout``."""
    drop_timeout: float = duration_field(2.0, allow_zero=False)
    """Seconds (trio clock) a client dropped for falling behind has to take the message
    being sent and its ``resync_required`` notice; past them its TCP connection is
    closed without a close frame (it sees 1006). The close frame after the notice has
    ``close_timeout`` more."""
    ping_interval: float = duration_field(20.0, allow_zero=False)
    """Seconds (trio clock) between keepalive pings to each client."""
    ping_timeout: float = duration_field(20.0, allow_zero=False)
    """Seconds (trio clock) a client has to answer a ping (its pong) before the server
    closes the connection (code 1011): a vanished client frees its slot."""
    idle_poll: float = duration_field(0.05, allow_zero=False, maximum=5.0)
    """Seconds (trio clock) between checks that the event log is idle, during shutdown."""

    @socket_send_buffer.validator
    def _check_sndbuf(self, attribute: attrs.Attribute[int | None], value: object) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 1 << 26
        ):
            raise ValueError("socket_send_buffer must be None or an int in [1024, 2**26] bytes")


@attrs.frozen(kw_only=True)
class FrontDoorStatistics:
    """Counters of a front door (contributing §D.7)."""

    port: int | None
    """The bound port, or None before :meth:`FrontDoor.serve` started."""
    admitting: bool
    """False once shutdown started."""
    connections: int
    """Clients connected now."""
    accepted: int
    """Handshakes accepted so far."""
    rejected: int
    """Handshakes refused (host, origin or token: 403; one address's limit: 429; full or
    shutting down: 503)."""
    http_requests: int = 0
    """Plain HTTP requests answered (pages, routes, 404, 405, 400, 431, and 403 for a
    foreign ``Host`` or a missing token)."""
    http_connections: int = 0
    """Plain HTTP connections open now that hold an admission slot (kept alive)."""
    http_reused: int = 0
    """Plain HTTP requests answered on a connection that had answered one before."""
    http_reclaimed: int = 0
    """Kept plain HTTP connections closed while waiting for their client, because a
    websocket handshake needed their slot (design §7.3)."""
    refusals: Mapping[str, int] = attrs.field(factory=dict)
    """Refused requests (websocket and plain HTTP) by reason, e.g. ``foreign_origin``,
    ``foreign_host``, ``missing_token``, ``wrong_token``, ``address_limit``, ``full``,
    ``shutting_down``, ``late_upgrade`` (a websocket upgrade after a plain request on the
    same connection)."""
    pending: int = 0
    """Connections accepted that have not sent a complete first request head yet (at
    most ``max_pending``)."""
    pending_evicted: int = 0
    """Pending connections closed to make room for a newer one, ``max_pending`` being
    pending (design §7.3)."""
    accept_failures: int = 0
    """Times ``accept()`` failed for want of file descriptors or memory."""
    route_answers: Mapping[str, int] = attrs.field(factory=dict)
    """Answers of the dynamic routes (:mod:`examples.web.routes`) by status, e.g.
    ``{"200": 3, "304": 2}``; a refusal before a route runs is in ``refusals``."""
