"""Leadership transfer and ``preferredLeaderIds`` (DLedger 0.3.1.2 ``DLedgerServer.
handleLeadershipTransfer``/``checkPreferredLeader``, ``DLedgerLeaderElector.handleLeadershipTransfer``/
``handleTakeLeadership``/``TakeLeadershipTask``).

- The leader, once a second, when ``preferredLeaderIds`` names live members other than itself that
  lag it by fewer than ``MAX_TRANSFER_LAG`` entries, hands the leadership to the least lagging one
  (log ``preferredLeaderId = X, which has the smallest fall behind index = N and is decided to be
  transferee.``). It stops taking appends (LEADER_TRANSFERRING) and sends LEADERSHIP_TRANSFER to the
  transferee with its last index; an answer other than SUCCESS in the same term lets it go on leading.
- The transferee, once its log reaches that index (at most ``TRANSFER_WAIT_S``), becomes a candidate
  of the next term at once and answers when the role it gets in that term is known: LEADER
  SUCCESS, FOLLOWER TAKE_LEADERSHIP_FAILED, a later term EXPIRED_TERM. While it takes the
  leadership it campaigns every 30..100 ms and refuses to vote for a member no more advanced
  (REJECT_TAKING_LEADERSHIP, ``Elector``).
- A LEADERSHIP_TRANSFER for neither end is UNEXPECTED_ARGUMENT.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.elector import Elector
from rmqcli.dledger.ledger import Ledger
from rmqcli.dledger.member import MemberState, Role
from rmqcli.dledger.pusher import EntryPusher

log = logging.getLogger(__name__)

Code = dp.DLedgerResponseCode
Call = Callable[[str, dp.LeadershipTransferRequest], Awaitable[dp.LeadershipTransferResponse | None]]
MAX_TRANSFER_LAG = 1000  # DLedgerConfig.maxLeadershipTransferWaitIndex
TRANSFER_WAIT_S = 1.0  # leadershipTransferWaitTimeout
CHECK_PERIOD_S = 1.0


def parse_preferred(text: str | None) -> tuple[str, ...]:
    """``preferredLeaderIds`` (``;``-separated)."""
    return tuple(p.strip() for p in (text or "").split(";") if p.strip())


class Transfer:
    """Both ends of a leadership transfer for one member."""

    def __init__(
        self,
        state: MemberState,
        elector: Elector,
        ledger: Ledger,
        pusher: EntryPusher,
        call: Call,
        preferred: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ):
        self.state, self.elector, self.ledger, self.pusher = state, elector, ledger, pusher
        self.call, self.preferred, self.clock = call, preferred, clock
        self.taking: tuple[int, asyncio.Future[dp.LeadershipTransferResponse]] | None = None
        self.last_check = 0.0
        self.running: asyncio.Task[None] | None = None

    # --- the RPC ----------------------------------------------------------------------------------
    async def handle(self, req: dp.LeadershipTransferRequest) -> dp.LeadershipTransferResponse:
        s = self.state
        if req.transfer_id == s.self_id:
            refused = self._leader_refuses(req)
            return refused if refused is not None else await self.hand_over(req.term, req.transferee_id or "")
        if req.transferee_id == s.self_id:
            if req.transfer_id != s.leader_id:
                return self._failed(req, Code.INCONSISTENT_LEADER)
            deadline = self.clock() + TRANSFER_WAIT_S
            while self.ledger.end_index < req.take_leadership_ledger_index:
                if self.clock() > deadline:
                    return self._failed(req, Code.TAKE_LEADERSHIP_FAILED)
                await asyncio.sleep(0.01)
            return await self._take(req)
        return dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.UNEXPECTED_ARGUMENT))

    def _failed(self, req: dp.LeadershipTransferRequest, code: Code) -> dp.LeadershipTransferResponse:
        """The answer of a ``DLedgerException``: the request's base, its code, the leader known."""
        return dp.LeadershipTransferResponse(
            group=req.group, remote_id=req.remote_id, local_id=req.local_id, term=req.term, code=int(code),
            leader_id=self.state.leader_id,
        )  # fmt: skip

    def _leader_refuses(self, req: dp.LeadershipTransferRequest) -> dp.LeadershipTransferResponse | None:
        s = self.state
        if not s.is_peer(req.transferee_id):
            return self._failed(req, Code.UNKNOWN_MEMBER)
        if s.curr_term != req.term:
            return self._failed(req, Code.INCONSISTENT_TERM)
        if s.role is not Role.LEADER:
            return self._failed(req, Code.NOT_LEADER)
        if self._lag(req.transferee_id or "") >= MAX_TRANSFER_LAG:
            return self._failed(req, Code.FALL_BEHIND_TOO_MUCH)
        return None

    def _lag(self, peer: str) -> int:
        return self.ledger.end_index - self.pusher.water_marks(self.state.curr_term).get(peer, -1)

    # --- the leader's end -------------------------------------------------------------------------
    async def hand_over(self, term: int, transferee: str) -> dp.LeadershipTransferResponse:
        """``DLedgerLeaderElector.handleLeadershipTransfer``."""
        s = self.state
        if s.curr_term != term:
            return dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.INCONSISTENT_TERM))
        if s.role is not Role.LEADER:
            return dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.NOT_LEADER))
        if s.transferee is not None:
            return dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.LEADER_TRANSFERRING))
        s.transferee = transferee
        take = dp.LeadershipTransferRequest(
            group=s.group, leader_id=s.leader_id, local_id=s.self_id, remote_id=transferee, term=term,
            take_leadership_ledger_index=self.ledger.end_index, transfer_id=s.self_id,
            transferee_id=transferee,
        )  # fmt: skip
        answer = await self.call(transferee, take)
        if answer is None:
            answer = dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.NETWORK_ERROR))
        if answer.code != Code.SUCCESS or (s.curr_term == term and s.transferee is not None):
            log.warning("leadershipTransfer failed, set transferee to null")
            s.transferee = None
        return answer

    def tick(self) -> None:
        """``checkPreferredLeader``, once a second, on the leader."""
        now = self.clock()
        if now - self.last_check < CHECK_PERIOD_S:
            return
        self.last_check = now
        s = self.state
        if s.role is not Role.LEADER or not self.preferred or s.transferee is not None:
            return
        if s.self_id in self.preferred or (self.running is not None and not self.running.done()):
            return
        live = [p for p in self.preferred if s.is_peer(p) and s.live.get(p)]
        if not live:
            return
        lags = {p: self._lag(p) for p in live}
        best = min(live, key=lambda p: lags[p])
        log.info("preferredLeaderId = %s, which has the smallest fall behind index = %d and is decided to "
                 "be transferee.", best, lags[best])  # fmt: skip
        if lags[best] < MAX_TRANSFER_LAG:
            self.running = asyncio.ensure_future(self._hand_over_logged(s.curr_term, best))

    async def _hand_over_logged(self, term: int, transferee: str) -> None:
        started = self.clock()
        answer = await self.hand_over(term, transferee)
        log.info("transfer finished. transferee=%s, code=%d, cost=%dms", transferee, answer.code,
                 (self.clock() - started) * 1000)  # fmt: skip

    # --- the transferee's end ---------------------------------------------------------------------
    async def _take(self, req: dp.LeadershipTransferRequest) -> dp.LeadershipTransferResponse:
        """``handleTakeLeadership``: a candidate of the next term now; answered by ``on_role``."""
        s = self.state
        if s.curr_term != req.term:
            return dp.LeadershipTransferResponse(term=s.curr_term, code=int(Code.INCONSISTENT_TERM))
        target = req.term + 1
        future: asyncio.Future[dp.LeadershipTransferResponse] = asyncio.get_running_loop().create_future()
        self.taking = (target, future)
        self.elector.term_to_take = target
        s.change_to_candidate(target)
        self.elector.need_increase_term = True
        return await future

    def on_role(self, term: int, role: Role) -> None:
        """``TakeLeadershipTask.check``: the transferee's answer once its role in the term is known."""
        if self.taking is None:
            return
        target, future = self.taking
        if term > target:
            code = Code.EXPIRED_TERM
        elif term == target:
            if role is Role.LEADER:
                code = Code.SUCCESS
            elif role is Role.FOLLOWER:
                code = Code.TAKE_LEADERSHIP_FAILED
            else:
                return
        else:
            code = Code.TAKE_LEADERSHIP_FAILED if role is Role.FOLLOWER else Code.INTERNAL_ERROR
        if not future.done():
            future.set_result(dp.LeadershipTransferResponse(term=term, code=int(code)))
        log.info("TakeLeadershipTask finished. term=%d, role=%s, code=%d", term, role.value, code)
        self.taking = None
        self.elector.term_to_take = -1
