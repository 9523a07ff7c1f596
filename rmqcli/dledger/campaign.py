"""A candidate's count of its vote answers and what it does next (DLedger 0.3.1.2
``DLedgerLeaderElector.maintainAsCandidate``), and a leader's count of its heartbeat answers
(``sendHeartbeats``).

Votes: an answer other than UNKNOWN is valid; ACCEPT counts for the candidate; REJECT_TERM_NOT_READY
would be an ACCEPT once the voter reached the term; a voter whose log is newer
(REJECT_EXPIRED_LEDGER_TERM, REJECT_SMALL_LEDGER_END_INDEX) can never vote for it; a newer term in
REJECT_EXPIRED_VOTE_TERM / REJECT_TERM_SMALL_THAN_LEDGER answers is the largest term known. The
decision, first match: a larger known term -> campaign again in a new term; a voter with a leader ->
wait ``heartbeat interval x max leak`` longer; too few valid answers, or too few without the newer
logs -> retry later in the same term; a quorum accepted -> leader; a quorum counting the not-ready
ones -> revote at once; else a new term next time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.member import MemberState

RC = dp.DLedgerResponseCode


class ParseResult(Enum):
    """``VoteResponse.ParseResult``."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


@dataclass
class VoteTally:
    answered: int = 0  # allNum: every answer, a failed call included
    valid: int = 0
    accepted: int = 0
    not_ready: int = 0
    bigger_ledger: int = 0
    already_has_leader: bool = False
    known_max_term: int = -1

    def add(self, answer: dp.VoteResponse | None) -> None:
        self.answered += 1
        if answer is None or answer.vote_result == "UNKNOWN":
            return
        self.valid += 1
        result = answer.vote_result
        if result == "ACCEPT":
            self.accepted += 1
        elif result == "REJECT_ALREADY_HAS_LEADER":
            self.already_has_leader = True
        elif result in ("REJECT_TERM_SMALL_THAN_LEDGER", "REJECT_EXPIRED_VOTE_TERM"):
            self.known_max_term = max(self.known_max_term, answer.term)
        elif result in ("REJECT_EXPIRED_LEDGER_TERM", "REJECT_SMALL_LEDGER_END_INDEX"):
            self.bigger_ledger += 1
        elif result == "REJECT_TERM_NOT_READY":
            self.not_ready += 1

    def settled(self, state: MemberState) -> bool:
        """Whether the candidate stops waiting for more answers."""
        return (
            self.already_has_leader
            or state.is_quorum(self.accepted)
            or state.is_quorum(self.accepted + self.not_ready)
        )


@dataclass(frozen=True)
class Decision:
    result: ParseResult
    extra_wait_ms: int = 0  # added to the next vote time's random wait
    wait: bool = True  # False: no wait at all (revote at once)
    candidate_of: int | None = None  # become a candidate of this (larger) term


def decide(
    t: VoteTally, state: MemberState, term: int, heartbeat_ms: int, max_leak: int, max_vote_ms: int
) -> Decision:
    if t.known_max_term > term:
        return Decision(ParseResult.WAIT_TO_VOTE_NEXT, candidate_of=t.known_max_term)
    if t.already_has_leader:
        return Decision(ParseResult.WAIT_TO_REVOTE, heartbeat_ms * max_leak)
    if not state.is_quorum(t.valid):
        return Decision(ParseResult.WAIT_TO_REVOTE)
    if not state.is_quorum(t.valid - t.bigger_ledger):
        return Decision(ParseResult.WAIT_TO_REVOTE, max_vote_ms)
    if state.is_quorum(t.accepted):
        return Decision(ParseResult.PASSED)
    if state.is_quorum(t.accepted + t.not_ready):
        return Decision(ParseResult.REVOTE_IMMEDIATELY, wait=False)
    return Decision(ParseResult.WAIT_TO_VOTE_NEXT)


@dataclass
class HeartbeatTally:
    """``sendHeartbeats``'s count: this leader counts as one success."""

    succeeded: int = 1
    not_ready: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False

    def add(self, answer: dp.HeartBeatResponse | None) -> bool:
        """Count one answer; False when the peer did not answer (it is marked not live)."""
        if answer is None or answer.code == RC.NETWORK_ERROR:
            return False
        if answer.code == RC.SUCCESS:
            self.succeeded += 1
        elif answer.code == RC.EXPIRED_TERM:
            self.max_term = max(self.max_term, answer.term)
        elif answer.code == RC.INCONSISTENT_LEADER:
            self.inconsistent_leader = True
        elif answer.code == RC.TERM_NOT_READY:
            self.not_ready += 1
        return True
