"""``rmqcli.dledger.elector`` in-process: ``handleVote``'s checks in their order and
``handleHeartBeat``'s role changes (DLedger 0.3.1.2 ``DLedgerLeaderElector``), with ``currterm``
written before a vote is answered. The real node's view of the same answers is in
``test_protocol_java.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.elector import Elector
from rmqcli.dledger.member import MemberState, Role, parse_peers

GROUP = "g"
PEERS = parse_peers("n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3")


def member(tmp_path: Path, **state: object) -> Elector:
    s = MemberState.load(GROUP, "n1", PEERS, tmp_path / "dledger-n1")
    for k, v in state.items():
        setattr(s, k, v)
    return Elector(s, clock=lambda: 100.0)


def vote(
    candidate: str = "n0", term: int = 0, end_index: int = -1, end_term: int = -1, **base
) -> dp.VoteRequest:
    fields = {"group": GROUP, "remote_id": "n1", "local_id": candidate, "leader_id": candidate, **base}
    return dp.VoteRequest(term=term, ledger_end_index=end_index, ledger_end_term=end_term, **fields)


@pytest.mark.parametrize(
    ("state", "request_", "result", "answer_term"),
    [
        ({}, vote("n9"), "REJECT_UNKNOWN_LEADER", 0),
        ({}, vote("n1"), "REJECT_UNEXPECTED_LEADER", 0),
        # the log comes before the term: a stale log is refused without looking at its term
        ({"ledger_end_term": 2, "ledger_end_index": 5}, vote(term=9, end_term=1, end_index=50),
         "REJECT_EXPIRED_LEDGER_TERM", 0),
        ({"ledger_end_term": 2, "ledger_end_index": 5}, vote(term=9, end_term=2, end_index=4),
         "REJECT_SMALL_LEDGER_END_INDEX", 0),
        ({"curr_term": 3}, vote(term=2), "REJECT_EXPIRED_VOTE_TERM", 3),
        ({"curr_term": 3, "curr_vote_for": "n2"}, vote(term=3), "REJECT_ALREADY_VOTED", 3),
        ({"curr_term": 3, "curr_vote_for": "n2", "leader_id": "n2"}, vote(term=3),
         "REJECT_ALREADY_HAS_LEADER", 3),
        ({"curr_term": 3}, vote(term=4), "REJECT_TERM_NOT_READY", 3),
        ({"curr_term": 3, "ledger_end_term": 5, "ledger_end_index": 1}, vote(term=3, end_term=5, end_index=1),
         "REJECT_TERM_SMALL_THAN_LEDGER", 5),
        ({"curr_term": 3, "curr_vote_for": "n0"}, vote(term=3), "ACCEPT", 3),  # a repeated vote
        ({"curr_term": 3}, vote(term=3, end_term=1, end_index=0), "ACCEPT", 3),
    ],
)  # fmt: skip
def test_vote_checks_in_order(tmp_path, state, request_, result, answer_term) -> None:
    e = member(tmp_path, **state)
    answer = e.handle_vote(request_)
    assert (answer.vote_result, answer.term) == (result, answer_term)
    assert (answer.local_id, answer.remote_id, answer.leader_id) == (
        request_.local_id,
        "n1",
        request_.leader_id,
    )
    written = e.state.term_file.exists()
    assert written == (result == "ACCEPT")
    if written:
        assert e.state.term_file.read_text() == f"voteLeader=n0\ncurrTerm={answer_term}\n"


def test_a_newer_vote_term_makes_a_candidate_that_moves_up_at_its_next_round(tmp_path) -> None:
    e = member(tmp_path, curr_term=3, role=Role.FOLLOWER, leader_id="n2")
    assert e.handle_vote(vote(term=7)).vote_result == "REJECT_TERM_NOT_READY"
    assert (e.state.role, e.state.leader_id, e.state.curr_term, e.need_increase_term) == (
        Role.CANDIDATE,
        None,
        3,
        True,
    )
    assert e.state.next_term() == 7 and e.state.curr_vote_for is None
    assert e.handle_vote(vote(term=7)).vote_result == "ACCEPT"


def test_wrong_receiver_or_group_is_a_code_not_a_vote(tmp_path) -> None:
    e = member(tmp_path, leader_id="n2")
    other = e.handle_vote(vote(remote_id="n2"))
    assert (other.code, other.vote_result, other.leader_id) == (401, "UNKNOWN", "n2")
    assert e.handle_vote(vote(group="h")).code == 400


def beat(leader: str = "n0", term: int = 0) -> dp.HeartBeatRequest:
    return dp.HeartBeatRequest(group=GROUP, remote_id="n1", local_id=leader, leader_id=leader, term=term)


def test_heartbeats(tmp_path) -> None:
    e = member(tmp_path, curr_term=2)
    assert (e.handle_heartbeat(beat("n9", 2)).code, e.handle_heartbeat(beat("n1", 2)).code) == (401, 402)
    old = e.handle_heartbeat(beat(term=1))
    assert (old.code, old.term) == (403, 2)
    assert (e.handle_heartbeat(beat(term=2)).code, e.state.role, e.state.leader_id) == (
        200,
        Role.FOLLOWER,
        "n0",
    )
    assert e.handle_heartbeat(beat("n2", 2)).code == 409  # a second leader in the term
    newer = e.handle_heartbeat(beat(term=5))
    assert (newer.code, e.state.role, e.state.known_max_term, e.need_increase_term) == (
        416,
        Role.CANDIDATE,
        5,
        True,
    )
    assert not e.state.term_file.exists()  # no vote, no new term yet: nothing persisted


def test_currterm_survives_a_restart_and_a_lost_file(tmp_path) -> None:
    e = member(tmp_path, curr_term=4)
    assert e.handle_vote(vote(term=4)).vote_result == "ACCEPT"
    e.state.role = Role.CANDIDATE
    e.state.next_term()  # a second write: the first is kept as currterm.bak
    again = MemberState.load(GROUP, "n1", PEERS, e.state.home)
    assert (again.curr_term, again.curr_vote_for) == (5, None)
    e.state.term_file.unlink()
    from_bak = MemberState.load(GROUP, "n1", PEERS, e.state.home)
    assert (from_bak.curr_term, from_bak.curr_vote_for) == (4, "n0")


def test_peers_parse_as_dledger_config() -> None:
    assert parse_peers("n0-10.0.0.1:40911; n1-host-a:40912;") == {
        "n0": "10.0.0.1:40911",
        "n1": "host-a:40912",
    }
    with pytest.raises(ValueError, match="ID-HOST:PORT"):
        parse_peers("n0:40911")
