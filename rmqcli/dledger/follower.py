"""A follower's side of the leader's pushes (DLedger 0.3.1.2 ``DLedgerEntryPusher.EntryHandler``).

- APPEND (one entry, or a batch in ``batchEntry``) waits under its first index until the log
  reaches it, so pushes that arrive out of order are stored in order; a second push for an index
  already waiting is answered REPEATED_PUSH. An append the follower cannot make (another term or
  leader, a position that is not the next one) is answered INCONSISTENT_STATE, which sends the
  leader back to COMPARE.
- COMPARE answers SUCCESS when the log holds the same entry at that index; TRUNCATE makes the log
  end with the pushed entry (``Ledger.truncate``); both drop the appends waiting (unanswered, as the
  Java handler drops them; the leader times them out). COMMIT moves the committed index.
- Every answer carries the follower's first and last index; APPEND, COMPARE and TRUNCATE answers
  also the push's first index and count. Appends and TRUNCATE apply the push's ``commitIndex``.
- Once a second (``check``): a waiting push the log already covers is answered by comparing its
  entries ([PushFallBehind]); if the next index has no push and a later one waited past 1 s, the
  lowest is answered INCONSISTENT_STATE ([PushFastForward]), so the leader compares again.
- Not a follower: COMPARE, TRUNCATE and COMMIT are answered NOT_FOLLOWER; appends keep waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.ledger import Ledger, LedgerError, same_entry
from rmqcli.dledger.member import MemberState, Role

log = logging.getLogger(__name__)

Code = dp.DLedgerResponseCode
PUSH_WAIT_S = 1.0  # the TimeoutFuture of a waiting append
CHECK_PERIOD_S = 1.0


@dataclass
class _Waiting:
    request: dp.PushEntryRequest
    answer: asyncio.Future[dp.PushEntryResponse]
    since: float

    def entries(self) -> list[dp.DLedgerEntry]:
        r = self.request
        return list(r.batch_entry) if r.batch_entry else [r.entry] if r.entry is not None else []


class EntryHandler:
    """Answers PUSH requests for a follower whose log is ``ledger``."""

    def __init__(self, state: MemberState, ledger: Ledger, clock: Callable[[], float] = time.monotonic):
        self.state, self.ledger, self.clock = state, ledger, clock
        self.waiting: dict[int, _Waiting] = {}
        self.last_check = 0.0

    def answer(self, req: dp.PushEntryRequest, code: Code) -> dp.PushEntryResponse:
        """``buildResponse``."""
        out = dp.PushEntryResponse(group=req.group, code=int(code), term=req.term)
        if req.type != "COMMIT":
            out.index, out.count = first_index(req), _count(req)
        out.begin_index, out.end_index = self.ledger.begin_index, self.ledger.end_index
        return out

    def handle(self, req: dp.PushEntryRequest) -> dp.PushEntryResponse | asyncio.Future[dp.PushEntryResponse]:
        """``handlePush``: an answer now, or a future the log's progress completes."""
        kind = req.type
        if kind == "APPEND":
            if not req.batch_entry and req.entry is None:
                return self.answer(req, Code.UNEXPECTED_ARGUMENT)
            first = first_index(req)
            if first in self.waiting:
                return self.answer(req, Code.REPEATED_PUSH)
            fut: asyncio.Future[dp.PushEntryResponse] = asyncio.get_running_loop().create_future()
            self.waiting[first] = _Waiting(req, fut, self.clock())
            self.drain()
            return fut
        if kind in ("COMPARE", "TRUNCATE") and req.entry is None:
            return self.answer(req, Code.UNEXPECTED_ARGUMENT)
        if kind != "COMMIT":
            self._drop_waiting()
        if self.state.role is not Role.FOLLOWER:
            return self.answer(req, Code.NOT_FOLLOWER)
        if kind == "COMMIT":
            self.ledger.update_committed_index(req.term, req.commit_index)
            return self.answer(req, Code.SUCCESS)
        if kind == "COMPARE":
            return self.answer(req, Code.SUCCESS if self._holds(req.entry) else Code.INCONSISTENT_STATE)  # type: ignore[arg-type]
        return self._truncate(req)

    def _holds(self, entry: dp.DLedgerEntry) -> bool:
        try:
            return same_entry(entry, self.ledger.get(entry.index))
        except LedgerError:
            return False

    def _from_leader(self, req: dp.PushEntryRequest) -> str | None:
        """Why the log refuses a push's entries (``None``: it takes them): the store's checks."""
        s = self.state
        if req.term != s.curr_term:
            return f"term {req.term} != {s.curr_term}"
        if req.leader_id != s.leader_id:
            return f"leader {req.leader_id} != {s.leader_id}"
        return None

    def _truncate(self, req: dp.PushEntryRequest) -> dp.PushEntryResponse:
        entry = req.entry
        assert entry is not None
        why = self._from_leader(req)
        if why is None:
            try:
                self.ledger.truncate(entry)
                log.info("[HandleDoTruncate] truncateIndex=%d pos=%d", entry.index, entry.pos)
            except (LedgerError, OSError) as exc:
                why = str(exc)
        if why is not None:
            log.warning("DLedger %s: truncate at %d refused: %s", self.state.self_id, entry.index, why)
            return self.answer(req, Code.INCONSISTENT_STATE)
        self.ledger.update_committed_index(req.term, req.commit_index)
        return self.answer(req, Code.SUCCESS)

    def _drop_waiting(self) -> None:
        for waiting in self.waiting.values():
            waiting.answer.cancel()  # no answer: the leader's own timeout handles it
        self.waiting.clear()

    def drain(self) -> None:
        """The waiting appends the log can take now, in index order."""
        if self.state.role is not Role.FOLLOWER:
            return
        while (waiting := self.waiting.pop(self.ledger.end_index + 1, None)) is not None:
            req = waiting.request
            code = Code.SUCCESS
            why = self._from_leader(req)
            if why is None:
                try:
                    for entry in waiting.entries():
                        self.ledger.append_as_follower(entry)
                except (LedgerError, OSError) as exc:
                    why = str(exc)
            if why is not None:
                log.warning("DLedger %s: append at %d refused: %s", self.state.self_id, first_index(req), why)
                code = Code.INCONSISTENT_STATE
            else:
                self.ledger.update_committed_index(req.term, req.commit_index)
            _complete(waiting, self.answer(req, code))

    def check(self) -> None:
        """``checkAbnormalFuture``, at most once a second."""
        now = self.clock()
        if now - self.last_check < CHECK_PERIOD_S or not self.waiting or self.state.role is not Role.FOLLOWER:
            return
        self.last_check = now
        end = self.ledger.end_index
        for first, waiting in list(self.waiting.items()):
            entries = waiting.entries()
            if entries and entries[-1].index <= end:
                same = all(self._holds(e) for e in entries)
                log.info("[PushFallBehind] ledgerEndIndex=%d entryIndex=%d same=%s", end, first, same)
                del self.waiting[first]
                code = Code.SUCCESS if same else Code.INCONSISTENT_STATE
                _complete(waiting, self.answer(waiting.request, code))
        if end + 1 in self.waiting:
            return
        late = [first for first, w in self.waiting.items() if now - w.since > PUSH_WAIT_S]
        if late:
            waiting = self.waiting.pop(min(late))
            log.warning("[PushFastForward] ledgerEndIndex=%d entryIndex=%d", end, min(late))
            _complete(waiting, self.answer(waiting.request, Code.INCONSISTENT_STATE))

    def close(self) -> None:
        self._drop_waiting()


def first_index(req: dp.PushEntryRequest) -> int:
    if req.batch_entry:
        return req.batch_entry[0].index
    return req.entry.index if req.entry is not None else -1


def _count(req: dp.PushEntryRequest) -> int:
    return len(req.batch_entry) if req.batch_entry else 1 if req.entry is not None else 0


def _complete(waiting: _Waiting, answer: dp.PushEntryResponse) -> None:
    if not waiting.answer.done():
        waiting.answer.set_result(answer)
