"""The metrics room's façade: Prometheus metrics of a runtime (design §1.7).

:mod:`._catalogue` (the metric list) needs nothing; :mod:`._metrics` needs
``prometheus_client`` (the ``metrics`` extra), so :class:`RuntimeMetrics` is loaded on
first use (a module ``__getattr__``): only a runtime that asks for metrics imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._catalogue import METRICS as METRICS
from ._catalogue import MetricSpec as MetricSpec
from ._lifecycle import Lifecycle as Lifecycle

if TYPE_CHECKING:
    from ._metrics import RuntimeMetrics as RuntimeMetrics

__all__ = ["METRICS", "Lifecycle", "MetricSpec", "RuntimeMetrics"]


def __getattr__(name: str) -> Any:
    if name == "RuntimeMetrics":
        from ._metrics import RuntimeMetrics

        return RuntimeMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
