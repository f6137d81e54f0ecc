"""A cluster of event logs on one PostgreSQL ledger (docs/cluster.rst).

The event log imports only this façade. Its modules:

* ``_store``: the cluster's tables and its transactions (admission under the ``inflight``
  row, locks in one order, dense seqs from the ``head`` row taken last, claims with
  ``FOR UPDATE SKIP LOCKED``, writes conditional on the run's owner);
* ``_node``: one node: its writer (batches), its follower (the committed events, in
  order, to its window, mirror and ports) and its drain (claims and runs).
"""

from __future__ import annotations

from ._node import ClusterNode as ClusterNode

__all__ = ["ClusterNode"]
