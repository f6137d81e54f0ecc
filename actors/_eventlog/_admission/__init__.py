"""Admission: what the event log does with a request before a run exists (design §6.1-6.5).

A sub-room of the event log; the rest of the log imports these names from here:

* :class:`Intake` validates a request at the boundary (§6.2), finds its request id
  (idempotency, §6.3, through the :class:`RequestStore`), joins an equal run in flight
  (coalescing, §6.4) or asks the gate for capacity (§6.5), and decides it;
* :class:`AdmissionGate` is the capacity bound and the ledger's health: it refuses with
  ``retry_after`` (§6.16) and pauses admission while the ledger cannot commit (§6.13);
* :class:`Admission` is a decided request, whose receipt is returned once durable.

The run lifecycle that follows (start, progress, finish, cancel) is not admission's:
it lives in :mod:`actors._eventlog._runs`.
"""

from ._decided import Admission as Admission
from ._gate import AdmissionGate as AdmissionGate
from ._idempotency import RequestStore as RequestStore
from ._idempotency import StoredRequest as StoredRequest
from ._intake import Intake as Intake

__all__ = ["Admission", "AdmissionGate", "Intake", "RequestStore", "StoredRequest"]
