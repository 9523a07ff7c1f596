"""How a DLedger member answers votes and heartbeats (DLedger 0.3.1.2 ``DLedgerLeaderElector``
``handleVote`` and ``handleHeartBeat``), on a ``MemberState``.

A vote is checked in ``handleVote``'s order, the first match answering: the candidate must be a
peer (and not this member, unless it votes for itself); a candidate whose log ends in an older term,
or at a smaller index of the same term, is refused before its term is looked at; then an older
vote term is refused, a vote already given to another candidate in this term is refused (whether a
leader is known says which reason), a newer term makes this member a candidate that moves to that
term on its next round (``REJECT_TERM_NOT_READY``), a term older than this member's log is refused
with the log's term, and a member taking leadership refuses an equal log; otherwise the vote is
given and ``currterm`` written before the answer. A heartbeat from the leader of this member's term
makes it that leader's follower; an older term is refused with this member's term, a newer one
answered ``TERM_NOT_READY`` after this member becomes a candidate of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.member import MemberState, Role

RC = dp.DLedgerResponseCode


class Elector:
    """Answers ``VOTE`` and ``HEART_BEAT`` for ``state``; ``need_increase_term`` asks the
    campaign loop to move to the next term at once; ``last_leader_heartbeat`` (monotonic s)."""

    def __init__(self, state: MemberState, clock: Callable[[], float] = time.monotonic):
        self.state = state
        self.clock = clock
        self.need_increase_term = False
        self.last_leader_heartbeat = clock()
        self.preferred: tuple[str, ...] = ()  # preferredLeaderIds
        self.term_to_take = -1  # the term a leadership transfer makes this member campaign in

    @property
    def taking_leadership(self) -> bool:
        """``isTakingLeadership``: a preferred member campaigning in the term a transfer gave it."""
        s = self.state
        return s.self_id in self.preferred and self.term_to_take == s.curr_term

    def checked(self, req: dp._Base, answer: dp._Base) -> dp._Base | None:
        """The group and receiver checks every handler makes first (``DLedgerServer.handleX``)."""
        s = self.state
        code = None
        if req.remote_id != s.self_id:
            code = RC.UNKNOWN_MEMBER
        elif req.group != s.group:
            code = RC.UNKNOWN_GROUP
        if code is None:
            return None
        for name in ("group", "remote_id", "local_id", "leader_id", "term"):
            setattr(answer, name, getattr(req, name))
        answer.code, answer.leader_id = int(code), s.leader_id
        return answer

    def handle_vote(self, req: dp.VoteRequest, self_vote: bool = False) -> dp.VoteResponse:
        answer = dp.VoteResponse(
            group=req.group, remote_id=req.remote_id, local_id=req.local_id, leader_id=req.leader_id,
            term=req.term, code=req.code,
        )  # fmt: skip
        if not self_vote and self.checked(req, answer) is not None:
            return answer
        s = self.state
        answer.term = s.curr_term

        def result(name: str) -> dp.VoteResponse:
            answer.vote_result = name
            return answer

        candidate = req.leader_id
        if not s.is_peer(candidate):
            return result("REJECT_UNKNOWN_LEADER")
        if not self_vote and candidate == s.self_id:
            return result("REJECT_UNEXPECTED_LEADER")
        if req.ledger_end_term < s.ledger_end_term:
            return result("REJECT_EXPIRED_LEDGER_TERM")
        if req.ledger_end_term == s.ledger_end_term and req.ledger_end_index < s.ledger_end_index:
            return result("REJECT_SMALL_LEDGER_END_INDEX")
        if req.term < s.curr_term:
            return result("REJECT_EXPIRED_VOTE_TERM")
        if req.term == s.curr_term:
            if s.curr_vote_for is not None and s.curr_vote_for != candidate:
                return result(
                    "REJECT_ALREADY_HAS_LEADER" if s.leader_id is not None else "REJECT_ALREADY_VOTED"
                )
        else:
            s.change_to_candidate(req.term)
            self.need_increase_term = True
            return result("REJECT_TERM_NOT_READY")
        if req.term < s.ledger_end_term:
            answer.term = s.ledger_end_term
            return result("REJECT_TERM_SMALL_THAN_LEDGER")
        if (
            not self_vote
            and self.taking_leadership
            and req.ledger_end_term == s.ledger_end_term
            and s.ledger_end_index >= req.ledger_end_index
        ):
            return result("REJECT_TAKING_LEADERSHIP")
        s.set_vote_for(candidate)
        return result("ACCEPT")

    def handle_heartbeat(self, req: dp.HeartBeatRequest) -> dp.HeartBeatResponse:
        answer = dp.HeartBeatResponse()
        if self.checked(req, answer) is not None:
            return answer
        s = self.state
        if not s.is_peer(req.leader_id):
            return dp.HeartBeatResponse(term=s.curr_term, code=int(RC.UNKNOWN_MEMBER))
        if req.leader_id == s.self_id:
            return dp.HeartBeatResponse(term=s.curr_term, code=int(RC.UNEXPECTED_MEMBER))
        if req.term < s.curr_term:
            return dp.HeartBeatResponse(term=s.curr_term, code=int(RC.EXPIRED_TERM))
        if req.term == s.curr_term:
            if s.leader_id is None:
                s.change_to_follower(req.term, req.leader_id)
                self.last_leader_heartbeat = self.clock()
                return answer
            if s.leader_id == req.leader_id:
                self.last_leader_heartbeat = self.clock()
                return answer
            return dp.HeartBeatResponse(code=int(RC.INCONSISTENT_LEADER))
        s.change_to_candidate(req.term)
        self.need_increase_term = True
        return dp.HeartBeatResponse(code=int(RC.TERM_NOT_READY))

    def is_leader_lost(self, heartbeat_interval_s: float, max_leak: int) -> bool:
        """A follower that heard no heartbeat for ``max_leak`` intervals (``maintainAsFollower``)."""
        return (
            self.state.role is Role.FOLLOWER
            and self.clock() - self.last_leader_heartbeat > max_leak * heartbeat_interval_s
        )
