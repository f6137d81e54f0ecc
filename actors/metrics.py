"""Prometheus metrics of a runtime (design §1.7); needs the ``metrics`` extra.

``pip install 'trio-actors[metrics]'`` installs ``prometheus_client``. Importing this
module without it raises ``ModuleNotFoundError``; :mod:`actors` itself never imports it,
so an application that asks for no metrics pays nothing.

* :class:`RuntimeMetrics`: one runtime's metrics in a
  :class:`~prometheus_client.CollectorRegistry` of its own.
  ``open_runtime(RuntimeConfig(metrics=True))`` makes one: ``runtime.metrics_registry``;
* :class:`Lifecycle`: the live supervision tree and helpers behind an Observer page
  (``RuntimeMetrics.lifecycle``);
* ``METRICS``: every metric, its type, labels and meaning (documented from it).
"""

from __future__ import annotations

from ._metrics import METRICS as METRICS
from ._metrics import Lifecycle as Lifecycle
from ._metrics import MetricSpec as MetricSpec
from ._metrics import RuntimeMetrics as RuntimeMetrics

__all__ = ["METRICS", "Lifecycle", "MetricSpec", "RuntimeMetrics"]
