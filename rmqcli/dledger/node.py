"""A DLedger member on asyncio: its peer port and its election loop (DLedger 0.3.1.2
``DLedgerServer``, ``DLedgerRpcNettyService``, ``DLedgerLeaderElector.StateMaintainer``).

The peer port answers VOTE and HEART_BEAT through ``Elector``, PUSH through ``EntryHandler``
(``follower``), METADATA with the peers, and every other DLedger request with UNSUPPORTED in its
body (never an empty answer: a Java peer fails on one). A leader replicates its log through
``EntryPusher`` (``pusher``); ``append`` is a send. The log (``ledger``) is flushed every 10 ms in a
worker thread and its checkpoint written every 3 s, as ``FlushDataService`` does; each member logs
its state every 3 s as the Java ``QuorumAckChecker`` does, a candidate the count of each vote round
(``[PARSE_VOTE_RESULT]``, as ``maintainAsCandidate``). Every 10 ms the loop does what the role asks:
a leader sends heartbeats every ``heartbeat_interval_ms`` and steps down without a quorum of
answers for ``max_heartbeat_leak`` intervals; a follower without heartbeats for as long becomes a
candidate of its term; a candidate campaigns at random intervals of
``min_vote_interval_ms``..``max_vote_interval_ms`` (see ``campaign``). Calls to peers time out after
3 s, as the Java ones do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.campaign import Decision, HeartbeatTally, ParseResult, VoteTally, decide
from rmqcli.dledger.elector import Elector
from rmqcli.dledger.follower import EntryHandler
from rmqcli.dledger.ledger import Hook, Ledger, Stored, flush_files
from rmqcli.dledger.member import MemberState, Role
from rmqcli.dledger.pusher import Appended, EntryPusher, Settings
from rmqcli.dledger.transfer import Transfer
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.server.connection import Connection, Dispatch, Server

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 3.0  # DLedgerRpcNettyService: every call
LOOP_PERIOD_S = 0.01  # StateMaintainer
FLUSH_PERIOD_S = 0.01  # DLedgerConfig.flushFileInterval
CHECKPOINT_PERIOD_S = 3.0  # DLedgerConfig.checkPointInterval
STATE_LOG_PERIOD_S = 3.0
DEFAULT_DATA_FILE_SIZE = 1 << 30  # mappedFileSizeCommitLog


_DLEDGER_CODES = frozenset(int(c) for c in dp.DLedgerRequestCode)


@dataclass(frozen=True)
class Timing:
    """``DLedgerConfig``'s election settings (defaults of 0.3.1.2)."""

    heartbeat_interval_ms: int = 2000
    max_heartbeat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100


class DLedgerNode:
    """One member: ``start`` listens on its peer address and runs the loop until ``close``;
    ``on_role(term, role)`` is called on every role change."""

    def __init__(
        self,
        state: MemberState,
        timing: Timing = Timing(),
        on_role: Callable[[int, Role], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        data_file_size: int = DEFAULT_DATA_FILE_SIZE,
        preferred: tuple[str, ...] = (),
        batch_push: bool = False,
    ):
        self.state = state
        self.timing = timing
        self.clock = clock
        self.elector = Elector(state, clock)
        self.elector.preferred = preferred
        self.ledger = Ledger(state.home, state, data_file_size)
        self.handler = EntryHandler(state, self.ledger, clock)
        self.pusher = EntryPusher(state, self.ledger, self._push, Settings(batch_push=batch_push), clock)
        self.transfer = Transfer(
            state, self.elector, self.ledger, self.pusher, self._take_call, preferred, clock
        )
        self.on_role = on_role
        # the requests of other codes on the same port (a controller's, controller.md §1.1)
        self.extra_dispatch: Dispatch | None = None
        self.server = Server(f"dledger-{state.self_id}", self._dispatch)
        self.client = RemotingClient()
        self.last_parse = ParseResult.WAIT_TO_REVOTE
        self.next_vote_at = 0.0
        self.last_send_heartbeat = -1.0
        self.last_succ_heartbeat = clock()
        self._role = (state.curr_term, state.role)
        self._loop: asyncio.Task[None] | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._last = {"checkpoint": 0.0, "state log": 0.0}

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> int:
        host, _, port = self.state.peers[self.state.self_id].rpartition(":")
        bound = await self.server.start(host or "0.0.0.0", int(port))
        self._loop = asyncio.get_running_loop().create_task(self._run())
        log.info("DLedger %s of %s listens on %s:%d", self.state.self_id, self.state.group, host, bound)
        return bound

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        self.pusher.stop()
        self.handler.close()
        await self.server.close()
        await self.client.close()
        if self._flushing is not None:
            await self._flushing
        self.ledger.close()

    def append(self, body: bytes, hook: Hook | None = None) -> tuple[Stored, asyncio.Future[Appended]]:
        """A send on the leader: the entry in the log and a future of its commit (``LedgerError``
        NOT_LEADER, LEADER_TRANSFERRING or LEADER_PENDING_FULL when it is refused)."""
        return self.pusher.append(body, hook)

    # --- the peer port ---------------------------------------------------------------------------
    def _dispatch(self, request: RemotingCommand, conn: Connection) -> Any:
        code = request.code
        if self.extra_dispatch is not None and code not in _DLEDGER_CODES:
            return self.extra_dispatch(request, conn)
        try:
            if code == dp.DLedgerRequestCode.VOTE:
                answer: object = self.elector.handle_vote(jb.decode(dp.VoteRequest, request.body))
            elif code == dp.DLedgerRequestCode.HEART_BEAT:
                answer = self.elector.handle_heartbeat(jb.decode(dp.HeartBeatRequest, request.body))
            elif code == dp.DLedgerRequestCode.PUSH:
                push = jb.decode(dp.PushEntryRequest, request.body)
                refused = self.elector.checked(push, dp.PushEntryResponse())
                if refused is not None:
                    return dp.response_command(request, refused)
                handled = self.handler.handle(push)
                if isinstance(handled, asyncio.Future):
                    return self._answer_later(request, handled)
                answer = handled
            elif code == dp.DLedgerRequestCode.LEADERSHIP_TRANSFER:
                move = jb.decode(dp.LeadershipTransferRequest, request.body)
                refused = self.elector.checked(move, dp.LeadershipTransferResponse())
                if refused is not None:
                    return dp.response_command(request, refused)
                return self._answer_later(request, self.transfer.handle(move))
            elif code == dp.DLedgerRequestCode.METADATA:
                req = jb.decode(dp.MetadataRequest, request.body)
                answer = self.elector.checked(req, dp.MetadataResponse()) or dp.MetadataResponse(
                    group=self.state.group, leader_id=self.state.leader_id, peers=dict(self.state.peers)
                )
            else:
                answer = dp.HeartBeatResponse(code=int(dp.DLedgerResponseCode.UNSUPPORTED))
        except jb.BodyError as exc:
            return request.response(1, f"bad DLedger body: {exc}")  # SYSTEM_ERROR, as NettyRemotingAbstract
        self._role_changed()
        return dp.response_command(request, answer)

    @staticmethod
    async def _answer_later(request: RemotingCommand, pending: Awaitable[object]) -> RemotingCommand:
        return dp.response_command(request, await pending)

    async def _take_call(
        self, peer: str, req: dp.LeadershipTransferRequest
    ) -> dp.LeadershipTransferResponse | None:
        answer = await self._call(
            peer, dp.DLedgerRequestCode.LEADERSHIP_TRANSFER, req, dp.LeadershipTransferResponse
        )
        return answer  # type: ignore[return-value]

    async def _push(self, peer: str, req: dp.PushEntryRequest) -> dp.PushEntryResponse | None:
        answer = await self._call(peer, dp.DLedgerRequestCode.PUSH, req, dp.PushEntryResponse)
        return answer  # type: ignore[return-value]

    def _role_changed(self) -> None:
        s = self.state
        now = (s.curr_term, s.role)
        if now == self._role:
            return
        was_leader = self._role[1] is Role.LEADER
        self._role = now
        if was_leader:
            self.pusher.stop()
        if self.state.role is Role.FOLLOWER:
            self.last_parse = ParseResult.WAIT_TO_REVOTE
            self.handler.drain()
        elif self.state.role is Role.LEADER:
            self.last_send_heartbeat = -1.0
            self.last_succ_heartbeat = self.clock()
            self.pusher.lead(self.state.curr_term)
        log.info("DLedger %s: %s in term %d (leader %s)", self.state.self_id, self.state.role.value,
                 self.state.curr_term, self.state.leader_id)  # fmt: skip
        term = max(s.curr_term, s.known_max_term) if s.role is Role.CANDIDATE else s.curr_term
        self.transfer.on_role(term, s.role)
        if self.on_role is not None:
            self.on_role(*now)

    # --- the loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                role = self.state.role
                if role is Role.LEADER:
                    await self._as_leader()
                elif role is Role.FOLLOWER:
                    self._as_follower()
                else:
                    await self._as_candidate()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("DLedger %s: election loop", self.state.self_id)
            self._role_changed()
            self._keep_log()
            await asyncio.sleep(LOOP_PERIOD_S)

    def _keep_log(self) -> None:
        """The log's periodic work: appends waiting on a follower, the leader's quorum clock, the
        flush, the checkpoint, the state line."""
        if self.state.role is Role.FOLLOWER:
            self.handler.drain()
            self.handler.check()
        self.pusher.tick()
        self.transfer.tick()
        if self._flushing is None or self._flushing.done():
            dirty = self.ledger.take_dirty()
            if dirty:
                self._flushing = asyncio.ensure_future(asyncio.to_thread(flush_files, dirty))
        now = self.clock()
        if now - self._last["checkpoint"] > CHECKPOINT_PERIOD_S:
            self._last["checkpoint"] = now
            self.ledger.persist_checkpoint()
        if now - self._last["state log"] > STATE_LOG_PERIOD_S:
            self._last["state log"] = now
            s, lg = self.state, self.ledger
            log.info("[%s][%s] term=%d ledgerBegin=%d ledgerEnd=%d committed=%d watermarks=%s", s.self_id,
                     s.role.value, s.curr_term, lg.begin_index, lg.end_index, lg.committed_index,
                     self.pusher.marks)  # fmt: skip

    def _interval(self) -> float:
        return self.timing.heartbeat_interval_ms / 1000

    def _next_vote_time(self) -> float:
        """``getNextTimeToRequestVote``: sooner while taking over a transferred leadership."""
        t = self.timing
        low, high = (
            (t.min_take_leadership_vote_interval_ms, t.max_take_leadership_vote_interval_ms)
            if self.elector.taking_leadership
            else (t.min_vote_interval_ms, t.max_vote_interval_ms)
        )
        return self.clock() + (low + random.randrange(high - low)) / 1000

    def _as_follower(self) -> None:
        if self.elector.is_leader_lost(self._interval(), self.timing.max_heartbeat_leak):
            log.info("DLedger %s: no heartbeat from %s; candidate", self.state.self_id, self.state.leader_id)
            self.state.change_to_candidate(self.state.curr_term)

    async def _call(self, peer: str, code: dp.DLedgerRequestCode, body: object, cls: type) -> object | None:
        try:
            answer = await self.client.invoke(
                self.state.peers[peer], dp.request_command(code, body), RPC_TIMEOUT_S
            )
            return jb.decode(cls, answer.body)
        except Exception:  # unreachable, timed out, or an answer that does not read: no answer
            return None

    async def _as_candidate(self) -> None:
        s = self.state
        if self.clock() < self.next_vote_at and not self.elector.need_increase_term:
            return
        if self.last_parse is ParseResult.WAIT_TO_VOTE_NEXT or self.elector.need_increase_term:
            previous = s.curr_term
            term = s.next_term()
            log.info("%s_[INCREASE_TERM] from %d to %d", s.self_id, previous, term)
            self.last_parse = ParseResult.WAIT_TO_REVOTE
        else:
            term = s.curr_term
        if self.elector.need_increase_term:
            self.next_vote_at = self._next_vote_time()
            self.elector.need_increase_term = False
            return
        started = self.clock()
        tally = await self._collect_votes(term)
        t = self.timing
        decision: Decision = decide(
            tally, s, term, t.heartbeat_interval_ms, t.max_heartbeat_leak, t.max_vote_interval_ms
        )
        log.info("[%s] [PARSE_VOTE_RESULT] cost=%d term=%d memberNum=%d allNum=%d acceptedNum=%d "
                 "notReadyTermNum=%d biggerLedgerNum=%d alreadyHasLeader=%s maxTerm=%d result=%s", s.self_id,
                 (self.clock() - started) * 1000, term, len(s.peers), tally.answered, tally.accepted,
                 tally.not_ready, tally.bigger_ledger, str(tally.already_has_leader).lower(),
                 tally.known_max_term, decision.result.value)  # fmt: skip
        self.last_parse = decision.result
        self.next_vote_at = self._next_vote_time() + decision.extra_wait_ms / 1000 if decision.wait else 0.0
        if decision.candidate_of is not None and decision.candidate_of >= s.curr_term:
            s.change_to_candidate(decision.candidate_of)
        if decision.result is ParseResult.PASSED and s.curr_term == term and s.role is Role.CANDIDATE:
            log.info("[%s] [VOTE_RESULT] has been elected to be the leader in term %d", s.self_id, term)
            s.change_to_leader(term)

    async def _collect_votes(self, term: int) -> VoteTally:
        s = self.state
        req = dict(group=s.group, local_id=s.self_id, leader_id=s.self_id, term=term,
                   ledger_end_index=s.ledger_end_index, ledger_end_term=s.ledger_end_term)  # fmt: skip
        tally = VoteTally()
        tally.add(self.elector.handle_vote(dp.VoteRequest(remote_id=s.self_id, **req), self_vote=True))
        others = [p for p in s.peers if p != s.self_id]
        vote = dp.DLedgerRequestCode.VOTE
        calls = {
            asyncio.ensure_future(self._call(p, vote, dp.VoteRequest(remote_id=p, **req), dp.VoteResponse))
            for p in others
        }
        deadline = self.clock() + (2000 + random.randrange(self.timing.max_vote_interval_ms)) / 1000
        pending = calls
        while pending and not tally.settled(s):
            done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - self.clock()),
                                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if not done:
                break
            for task in done:
                tally.add(task.result())  # type: ignore[arg-type]
        for task in pending:
            task.cancel()
        return tally

    async def _as_leader(self) -> None:
        if self.clock() - self.last_send_heartbeat <= self._interval():
            return
        self.last_send_heartbeat = self.clock()
        s = self.state
        term = s.curr_term
        tally = HeartbeatTally()
        others = [p for p in s.peers if p != s.self_id]
        calls = {
            asyncio.ensure_future(self._call(p, dp.DLedgerRequestCode.HEART_BEAT, dp.HeartBeatRequest(
                group=s.group, local_id=s.self_id, remote_id=p, leader_id=s.self_id, term=term),
                dp.HeartBeatResponse)): p
            for p in others
        }  # fmt: skip
        pending = set(calls)
        deadline = self.clock() + self._interval()
        while pending and not (
            s.is_quorum(tally.succeeded) or s.is_quorum(tally.succeeded + tally.not_ready)
        ):
            done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - self.clock()),
                                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if not done:
                break
            for task in done:
                s.live[calls[task]] = tally.add(task.result())  # type: ignore[arg-type]
        for task in pending:
            task.cancel()
        if s.role is not Role.LEADER or s.curr_term != term:
            return
        if s.is_quorum(tally.succeeded):
            self.last_succ_heartbeat = self.clock()
            return
        if s.is_quorum(tally.succeeded + tally.not_ready):
            self.last_send_heartbeat = -1.0
        elif tally.max_term > term:
            s.change_to_candidate(tally.max_term)
        elif tally.inconsistent_leader:
            s.change_to_candidate(term)
        elif self.clock() - self.last_succ_heartbeat > self.timing.max_heartbeat_leak * self._interval():
            log.info("DLedger %s: no quorum of heartbeat answers; steps down", s.self_id)
            s.change_to_candidate(term)
