"""``/metrics``: a runtime's Prometheus metrics on the front door's port (design §7.8).

The text is prometheus_client's own (:func:`prometheus_client.generate_latest` of the
runtime's registry, :mod:`actors.metrics`), never written here. The route is protected
like every other: the front door's token, or :attr:`FrontDoorConfig.metrics_token
<examples.web.config.FrontDoorConfig.metrics_token>` (a scraper's token, which opens
nothing else); with ``metrics_open`` (loopback binds only) no token at all. The
``Host`` check (DNS rebinding) applies as to every plain HTTP request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .routes import HttpAnswer, HttpRequest, Route

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .config import FrontDoorConfig

__all__ = ["METRICS_PATH", "metrics_route"]

#: Where the metrics are served.
METRICS_PATH = "/metrics"


def metrics_route(registry: CollectorRegistry, config: FrontDoorConfig) -> Route:
    """The ``/metrics`` route serving ``registry`` with ``config``'s token rules."""

    async def scrape(request: HttpRequest) -> HttpAnswer:
        # The statistics are read without waiting: a scrape is one synchronous pass.
        return HttpAnswer(
            status=200, body=generate_latest(registry), content_type=CONTENT_TYPE_LATEST
        )

    tokens = () if config.metrics_token is None else (config.metrics_token,)
    return Route(
        prefix=METRICS_PATH,
        handler=scrape,
        protected=not config.metrics_open,
        tokens=tokens,
        name="metrics",
    )
