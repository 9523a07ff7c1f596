"""A leader's replication (DLedger 0.3.1.2 ``DLedgerEntryPusher``: ``EntryDispatcher`` per follower
and ``QuorumAckChecker``).

Each follower has a dispatcher in one of three states:

- COMPARE (its start, and after any refusal or error): the leader's entry at ``compareIndex``
  (first its last one) is compared with the follower's; an equal entry at the follower's end moves
  to APPEND after it; otherwise ``compareIndex`` walks back (to the follower's end when beyond it)
  until an entry matches, or to the leader's first entry, and the follower is truncated there
  (TRUNCATE, which also installs the first entry of an empty follower). A leader without entries
  sends nothing but heartbeats.
- APPEND: every entry from ``writeIndex`` on is pushed without waiting for the answers (at most
  ``MAX_PENDING_PUSHES`` unanswered); a SUCCESS raises the follower's watermark; INCONSISTENT_STATE
  goes back to COMPARE; the push after the watermark is sent again when its answer is 1 s late;
  with nothing to push for 1 s, a COMMIT push carries the committed index. With ``enableBatchPush``
  (``doBatchAppend``) a push carries the entries from ``writeIndex`` in ``batchEntry`` until their
  sizes reach ``maxBatchPushSize`` (4 KiB) or the log's end; a late batch is sent again whole.

The quorum checker sorts the watermarks of the term (the leader's own included, -1 for a member
not heard of) and commits the one at ``len // 2``: the highest index a majority holds, whatever term
wrote it (DLedger adds no entry at election). A send waits for its index to be committed: SUCCESS,
or WAIT_QUORUM_ACK_TIMEOUT after ``max_wait_ack_ms``, TERM_CHANGED when the leadership is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.ledger import Hook, Ledger, LedgerError, Stored
from rmqcli.dledger.member import MemberState, Role

log = logging.getLogger(__name__)

Code = dp.DLedgerResponseCode
Call = Callable[[str, dp.PushEntryRequest], Awaitable[dp.PushEntryResponse | None]]

MAX_PENDING_PUSHES = 1000  # EntryDispatcher.maxPendingSize
PUSH_RETRY_S = 1.0  # DLedgerConfig.maxPushTimeOutMs
COMMIT_IDLE_S = 1.0  # a COMMIT push after this long without one
ERROR_PAUSE_S = 0.5
IDLE_WAIT_S = 0.05
ERROR_LOG_PERIOD_S = 30.0


@dataclass
class Appended:
    """What a send waits for: its entry committed (``code`` SUCCESS) or why not."""

    code: Code
    stored: Stored


@dataclass
class _Ack:
    stored: Stored
    term: int
    deadline: float
    future: asyncio.Future[Appended]


@dataclass
class Settings:
    """``DLedgerConfig``'s replication settings (0.3.1.2 defaults)."""

    max_pending_requests: int = 10000
    max_wait_ack_ms: int = 2500
    batch_push: bool = False  # isEnableBatchPush
    max_batch_push_size: int = 4 * 1024


class Dispatcher:
    """The pushes to one follower (``EntryDispatcher``)."""

    def __init__(self, pusher: EntryPusher, peer: str, term: int):
        self.pusher, self.peer, self.term = pusher, peer, term
        self.mode = "COMPARE"
        self.compare_index = -1
        self.write_index = -1
        self.sent: dict[int, tuple[float, int]] = {}  # first index -> (when, entries) of each push
        self.last_push = 0.0
        self.wake = asyncio.Event()
        self.inflight: set[asyncio.Task[None]] = set()
        self.errors = 0
        self.last_error_log = 0.0
        self.pushes = 0  # APPEND requests sent (one per entry, or per batch)

    @property
    def ledger(self) -> Ledger:
        return self.pusher.ledger

    def request(
        self, kind: str, entry: dp.DLedgerEntry | None, batch: list[dp.DLedgerEntry] | None = None
    ) -> dp.PushEntryRequest:
        """``buildPushRequest``; with ``batch``, the entries of a batch push (``addEntry``)."""
        s = self.pusher.state
        return dp.PushEntryRequest(
            group=s.group, remote_id=self.peer, local_id=s.self_id, leader_id=s.self_id, term=self.term,
            type=kind, entry=entry, commit_index=self.ledger.committed_index, batch_entry=batch or [],
            total_size=sum(e.size for e in batch or ()),
        ).with_entries()  # fmt: skip

    def leading(self) -> bool:
        s = self.pusher.state
        return s.role is Role.LEADER and s.curr_term == self.term

    async def run(self) -> None:
        while self.leading():
            try:
                if self.mode == "APPEND":
                    await self._append()
                else:
                    await self._compare()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - as the Java dispatcher: log, compare again
                self._log_error(exc)
                self._change(-1, "COMPARE")
                await asyncio.sleep(ERROR_PAUSE_S)
        self._cancel_inflight()

    def _log_error(self, exc: Exception) -> None:
        """``[Push-<peer>]Error in <state>``: the first, then at most one per ``ERROR_LOG_PERIOD_S``
        with the count left out (a member that is down fails twice a second for as long)."""
        now = self.pusher.clock()
        self.errors += 1
        if now - self.last_error_log >= ERROR_LOG_PERIOD_S:
            more = f" ({self.errors - 1} more since)" if self.errors > 1 and self.last_error_log else ""
            log.warning("[Push-%s]Error in %s: %s%s", self.peer, self.mode, exc, more)
            self.last_error_log, self.errors = now, 0

    def _change(self, index: int, mode: str) -> None:
        """``changeState``."""
        log.info("[Push-%s]Change state from %s to %s at %d", self.peer, self.mode, mode, index)
        if mode == "APPEND":
            self.compare_index = -1
            self.pusher.water_mark(self.term, self.peer, index)
            self.write_index = index + 1
        elif mode == "COMPARE":
            self.sent.clear()
            self._cancel_inflight()
        elif mode == "TRUNCATE":
            self.compare_index = -1
        self.mode = mode

    def _cancel_inflight(self) -> None:
        for task in self.inflight:
            task.cancel()
        self.inflight.clear()

    async def _push(self, req: dp.PushEntryRequest) -> dp.PushEntryResponse:
        answer = await self.pusher.call(self.peer, req)
        if answer is None:
            raise ConnectionError(f"no answer from {self.peer} to {req.type}")
        return answer

    async def _compare(self) -> None:
        """``doCompare``."""
        ledger = self.ledger
        while self.leading() and self.mode in ("COMPARE", "TRUNCATE"):
            if self.compare_index == -1 and ledger.end_index == -1:
                await self._idle()
                return
            if self.compare_index == -1 or not ledger.begin_index <= self.compare_index <= ledger.end_index:
                self.compare_index = ledger.end_index
            answer = await self._push(self.request("COMPARE", ledger.get(self.compare_index)))
            truncate = -1
            if answer.code == Code.SUCCESS and self.compare_index == answer.end_index:
                self._change(self.compare_index, "APPEND")
                return
            if answer.code == Code.SUCCESS:
                truncate = self.compare_index
            elif answer.code == Code.INCONSISTENT_STATE:
                if answer.end_index < ledger.begin_index or answer.begin_index > ledger.end_index:
                    truncate = ledger.begin_index
                elif self.compare_index < answer.begin_index:
                    truncate = ledger.begin_index
                elif self.compare_index > answer.end_index:
                    self.compare_index = answer.end_index
                else:
                    self.compare_index -= 1
            else:
                raise ConnectionError(f"compare answered {answer.code}")
            if self.compare_index < ledger.begin_index:
                truncate = ledger.begin_index
            if truncate != -1:
                self._change(truncate, "TRUNCATE")
                await self._truncate(truncate)
                return

    async def _truncate(self, index: int) -> None:
        """``doTruncate``."""
        entry = self.ledger.get(index)
        log.info("[Push-%s]Will push data to truncate truncateIndex=%d pos=%d", self.peer, index, entry.pos)
        answer = await self._push(self.request("TRUNCATE", entry))
        if answer.code != Code.SUCCESS:
            raise ConnectionError(f"truncate answered {answer.code}")
        self.last_push = self.pusher.clock()
        self._change(index, "APPEND")

    async def _append(self) -> None:
        """``doAppend``: push what the follower lacks, pipelined."""
        ledger, now = self.ledger, self.pusher.clock()
        if self.write_index > ledger.end_index:
            if now - self.last_push > COMMIT_IDLE_S:
                self.last_push = now
                self._spawn(self._commit())
            self._retry_late(now)
            await self._idle()
            return
        if len(self.sent) >= MAX_PENDING_PUSHES:
            self._retry_late(now)
            if len(self.sent) >= MAX_PENDING_PUSHES:
                await self._idle()
                return
        self.write_index = self._send(self.write_index)
        await asyncio.sleep(0)

    def _send(self, first: int, count: int | None = None) -> int:
        """Push the entry at ``first`` (with batch push, the next ones too: ``count`` of them, or as
        many as ``max_batch_push_size`` takes); the index after the last one pushed."""
        settings = self.pusher.settings
        entries: list[dp.DLedgerEntry] = []
        index, size = first, 0
        while index <= self.ledger.end_index and (count is None or len(entries) < count):
            try:
                entry = self.ledger.get(index)
            except LedgerError as exc:
                if exc.code == Code.INDEX_LESS_THAN_LOCAL_BEGIN:
                    self._change(-1, "COMPARE")
                    return first
                raise
            entries.append(entry)
            index, size = index + 1, size + entry.size
            if count is None and (not settings.batch_push or size >= settings.max_batch_push_size):
                break
        if not entries:
            return first
        self.last_push = self.pusher.clock()
        self.sent[first] = (self.last_push, len(entries))
        self.pushes += 1
        if settings.batch_push:
            self._spawn(self._appended(self.request("APPEND", None, entries)))
        else:
            self._spawn(self._appended(self.request("APPEND", entries[0])))
        return index

    def _retry_late(self, now: float) -> None:
        """``doCheckAppendResponse`` / ``doCheckBatchAppendResponse``: the push after the watermark
        again when its answer is late (what the watermark covers is forgotten first)."""
        mark = self.pusher.water_marks(self.term).get(self.peer, -1)
        self.sent = {i: (t, n) for i, (t, n) in self.sent.items() if i + n - 1 > mark}
        nxt = mark + 1
        sent = self.sent.get(nxt)
        if sent is not None and now - sent[0] > PUSH_RETRY_S:
            log.warning("[Push-%s]Retry to push entry from %d to %d", self.peer, nxt, nxt + sent[1] - 1)
            self._send(nxt, sent[1])

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)

    async def _appended(self, req: dp.PushEntryRequest) -> None:
        try:
            answer = await self._push(req)
        except ConnectionError:
            return  # the late-answer retry pushes it again
        if not self.leading() or self.mode != "APPEND":
            return
        if answer.code == Code.SUCCESS:
            first = answer.index if answer.index is not None else req.first_entry_index
            last = first + max(answer.count, 1) - 1
            self.sent.pop(first, None)
            self.pusher.water_mark(answer.term, self.peer, last)
        elif answer.code == Code.INCONSISTENT_STATE:
            log.info("[Push-%s]Get INCONSISTENT_STATE when push index %d", self.peer, req.first_entry_index)
            self._change(-1, "COMPARE")
            self.wake.set()
        else:
            log.warning("[Push-%s]Get error response code %d", self.peer, answer.code)

    async def _commit(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._push(self.request("COMMIT", None))

    async def _idle(self) -> None:
        self.wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.wake.wait(), IDLE_WAIT_S)


@dataclass
class EntryPusher:
    """The leader's appends, dispatchers and quorum check."""

    state: MemberState
    ledger: Ledger
    call: Call
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], float] = time.monotonic
    marks: dict[int, dict[str, int]] = field(default_factory=dict)
    acks: dict[int, _Ack] = field(default_factory=dict)
    dispatchers: dict[str, tuple[Dispatcher, asyncio.Task[None]]] = field(default_factory=dict)
    last_refresh: float = 0.0

    # --- leadership ----------------------------------------------------------------------------
    def lead(self, term: int) -> None:
        """Dispatchers for every other member in ``term`` (the leader's, started by the node)."""
        self.stop()
        for peer in self.state.peers:
            if peer != self.state.self_id:
                d = Dispatcher(self, peer, term)
                self.dispatchers[peer] = (d, asyncio.ensure_future(d.run()))

    def stop(self) -> None:
        for _d, task in self.dispatchers.values():
            task.cancel()
        self.dispatchers.clear()
        for ack in list(self.acks.values()):
            self._finish(ack, Code.TERM_CHANGED)

    # --- watermarks ----------------------------------------------------------------------------
    def water_marks(self, term: int) -> dict[str, int]:
        return self.marks.setdefault(term, {p: -1 for p in self.state.peers})

    def water_mark(self, term: int, peer: str, index: int) -> None:
        """``updatePeerWaterMark``: only raised; the quorum is checked again."""
        marks = self.water_marks(term)
        if index > marks.get(peer, -1):
            marks[peer] = index
            self.check_quorum()

    # --- sends ----------------------------------------------------------------------------------
    def append(self, body: bytes, hook: Hook | None = None) -> tuple[Stored, asyncio.Future[Appended]]:
        """``handleAppend`` on the leader: the entry in the log and a future of its commit."""
        s = self.state
        if s.role is not Role.LEADER:
            raise LedgerError(Code.NOT_LEADER, f"{s.self_id} is not the leader (leader: {s.leader_id})")
        if s.transferee is not None:
            raise LedgerError(Code.LEADER_TRANSFERRING, f"leadership moving to {s.transferee}")
        if len(self.acks) > self.settings.max_pending_requests:
            raise LedgerError(Code.LEADER_PENDING_FULL, f"{len(self.acks)} sends wait for their quorum")
        term = s.curr_term
        stored = self.ledger.append_as_leader(term, body, hook)
        future: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        deadline = self.clock() + self.settings.max_wait_ack_ms / 1000
        self.acks[stored.index] = _Ack(stored, term, deadline, future)
        for d, _task in self.dispatchers.values():
            d.wake.set()
        self.water_mark(term, s.self_id, stored.index)
        return stored, future

    def check_quorum(self) -> None:
        """``QuorumAckChecker``: commit what a majority holds; the sends it covers succeed."""
        s = self.state
        if s.role is not Role.LEADER:
            return
        term = s.curr_term
        for old in [t for t in self.marks if t < term]:
            del self.marks[old]
        marks = sorted(self.water_marks(term).values(), reverse=True)
        quorum = marks[len(marks) // 2]
        self.ledger.update_committed_index(term, quorum)
        for index in [i for i in self.acks if i <= self.ledger.committed_index]:
            self._finish(self.acks[index], Code.SUCCESS)

    def tick(self) -> None:
        """Every loop of a leader: older terms' sends fail, late ones time out; the leader's own
        watermark follows its log each second (``QuorumAckChecker``)."""
        s = self.state
        now = self.clock()
        for ack in list(self.acks.values()):
            if ack.term != s.curr_term or s.role is not Role.LEADER:
                self._finish(ack, Code.TERM_CHANGED)
            elif now > ack.deadline:
                self._finish(ack, Code.WAIT_QUORUM_ACK_TIMEOUT)
        if s.role is Role.LEADER and now - self.last_refresh > 1.0:
            self.last_refresh = now
            self.water_mark(s.curr_term, s.self_id, self.ledger.end_index)
            self.check_quorum()

    def _finish(self, ack: _Ack, code: Code) -> None:
        self.acks.pop(ack.stored.index, None)
        if not ack.future.done():
            ack.future.set_result(Appended(code, ack.stored))
