"""A request decided by ``EventLog.admit``, and its receipt once durable (design §6.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._ledger import wait_durable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._ledger import Ticket
    from .._types import Receipt

    #: Decides a request after a ledger look-up: ``(receipt, ticket)``.
    Decide = Callable[[], Awaitable[tuple[Receipt, Ticket | None]]]

__all__ = ["Admission"]


class Admission:
    """A request decided by :meth:`EventLog.admit`; its receipt once durable.

    ``receipt`` is set when the request was decided at once (memory knew enough); it is
    None until :meth:`wait` returns when its request id had to be looked up first.
    """

    __slots__ = ("_later", "_ticket", "receipt")

    def __init__(
        self, receipt: Receipt | None, ticket: Ticket | None, later: Decide | None = None
    ) -> None:
        self.receipt = receipt
        self._ticket = ticket
        self._later = later

    async def wait(self) -> Receipt:
        """Return the receipt once its request is durable (design §6.10); a checkpoint.

        Raises:
            RequestConflict: (``request_conflict``) found in the ledger with other content.
            ActorStopped: (``actor_stopped``) the log closed during the look-up.
            LedgerError: (``ledger_error``) the request could not be made durable.
        """
        if self._later is not None:
            later, self._later = self._later, None
            self.receipt, self._ticket = await later()
        await wait_durable(self._ticket)
        assert self.receipt is not None
        return self.receipt
