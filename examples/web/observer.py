"""``/observer``: the live supervision tree and helpers in the browser (design §7.8).

The page (``/observer``, public like the dashboard: it holds no data) asks
``/observer/state`` (protected like every route: the token, design §7.3) for the
:class:`actors.metrics.Lifecycle` view: each supervisor with its strategy and children
(state, incarnation, restarts within the window), nested under the child that runs it,
the helper slots (pid, incarnation,
state, current job and for how long it has been seen, last exit), the system actors'
mailbox depth against capacity, and the last lifecycle events.

``/observer/state?after=N`` is a long poll: it answers as soon as the runtime has seen
more than ``N`` lifecycle events, or after ``hold`` seconds with the same view, so the
page hears of a helper's restart as it happens and never polls in a loop; a quiet
server costs one request every ``hold`` seconds per open page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .http import Page
from .metrics import metrics_route
from .routes import HttpAnswer, HttpRequest, Route

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from actors import ActorRef, HelperPool
    from actors.metrics import Lifecycle, RuntimeMetrics

    from .config import FrontDoorConfig

__all__ = ["OBSERVER_PATH", "observability", "observer_page", "observer_route"]

#: Where the page is served; its data is under ``OBSERVER_PATH + "/state"``.
OBSERVER_PATH = "/observer"
_PAGE = Path(__file__).resolve().parent / "observer.html"


async def observer_page() -> Page:
    """The Observer page (read once, when the server starts)."""
    return Page(body=await trio.Path(_PAGE).read_bytes())


def observer_route(
    lifecycle: Lifecycle,
    *,
    pool: Callable[[], HelperPool | None],
    mailboxes: Callable[[], Mapping[str, ActorRef]],
    hold: float,
) -> Route:
    """The ``/observer/state`` route: the view of ``lifecycle`` as JSON.

    Args:
        lifecycle: What the runtime's metrics keep of the tree and the helpers.
        pool: The running helper pool, or None between pools.
        mailboxes: The system actors' refs by name.
        hold: Seconds a long poll waits for a change (below the request deadline).
    """

    async def state(request: HttpRequest) -> HttpAnswer:
        after = request.query.get("after", "")
        try:
            seen = int(after) if after else -1
        except ValueError:
            return HttpAnswer.text(400, "after must be an integer")
        with trio.move_on_after(hold):
            await lifecycle.wait_changed(seen)
        view = lifecycle.view(pool=pool(), mailboxes=mailboxes())
        body = json.dumps(view, separators=(",", ":"), default=str).encode()
        return HttpAnswer(status=200, body=body, content_type="application/json")

    return Route(prefix=f"{OBSERVER_PATH}/state", handler=state, name="observer")


async def observability(
    metrics: RuntimeMetrics, config: FrontDoorConfig
) -> tuple[list[Route], dict[str, Page]]:
    """The routes (``/metrics``, ``/observer/state``) and page (``/observer``) of a
    server whose runtime is measured by ``metrics`` (design §7.8)."""
    sources = metrics.sources
    state = observer_route(
        metrics.lifecycle,
        pool=sources.pool,
        mailboxes=sources.mailboxes,
        hold=min(3.0, 0.6 * config.handshake_timeout),
    )
    routes = [metrics_route(metrics.registry, config), state]
    return routes, {OBSERVER_PATH: await observer_page()}
