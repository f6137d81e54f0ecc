"""The metrics room's façade: Prometheus metrics of a runtime (design §1.7).

:mod:`._catalogue` (the metric list) needs nothing; :mod:`._metrics` needs
``prometheus_client`` (the ``metrics`` extra), so only a runtime that asks for metrics
imports it.
"""

from __future__ import annotations

from ._catalogue import METRICS as METRICS
from ._catalogue import MetricSpec as MetricSpec
from ._lifecycle import Lifecycle as Lifecycle

__all__ = ["METRICS", "Lifecycle", "MetricSpec"]
