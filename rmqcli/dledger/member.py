"""A DLedger member's state and its ``currterm`` file (DLedger 0.3.1.2 ``MemberState``).

``currterm`` (``<storePathRootDir>/dledger-<selfId>/currterm``) holds ``voteLeader`` (empty: none)
and ``currTerm`` as ``java.util.Properties`` text, written as ``IOUtils.string2File`` writes it (a
``.tmp`` beside, the old content kept as ``.bak``) by ``persistTerm``: only when the member votes
(``setCurrVoteFor``) or moves to the next term (``nextTerm``), always before it answers. Role
changes are not persisted. A member counts itself among the peers; a quorum is more than half.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.durable import replace_file
from rmqcli.errors import CorruptDataError


class Role(Enum):
    """``MemberState.Role``."""

    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


def parse_peers(text: str) -> dict[str, str]:
    """``dLegerPeers`` (``n0-host:port;n1-host:port``): id -> address (``DLedgerConfig``: the id is
    the text before the first ``-``)."""
    peers = {}
    for item in text.split(";"):
        item = item.strip()
        if item:
            ident, sep, addr = item.partition("-")
            if not sep or not ident or not addr:
                raise ValueError(f"dLegerPeers: {item!r} is not ID-HOST:PORT")
            peers[ident] = addr
    return peers


def _properties(text: str) -> dict[str, str]:
    """``key=value`` lines as ``Properties.load`` reads the files DLedger writes (comments skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


@dataclass
class MemberState:
    group: str
    self_id: str
    peers: dict[str, str]  # id -> address, self included
    home: Path  # dledger-<selfId>
    role: Role = Role.CANDIDATE
    leader_id: str | None = None
    curr_term: int = 0
    curr_vote_for: str | None = None
    ledger_end_index: int = -1
    ledger_end_term: int = -1
    known_max_term: int = -1
    transferee: str | None = None
    live: dict[str, bool] = field(default_factory=dict)  # ``peersLiveTable``

    @property
    def term_file(self) -> Path:
        return self.home / dfmt.CURRTERM_FILE

    @classmethod
    def load(cls, group: str, self_id: str, peers: dict[str, str], home: Path) -> MemberState:
        """The state at start: term and vote from ``currterm`` (its ``.bak`` when it is missing, as
        ``IOUtils.file2String`` falls back), else term 0 and no vote."""
        state = cls(group, self_id, peers, home)
        for path in (state.term_file, state.term_file.with_name(dfmt.CURRTERM_FILE + dfmt.BAK_SUFFIX)):
            if path.exists():
                values = _properties(path.read_text("latin-1"))
                try:
                    state.curr_term = int(values.get(dfmt.CURR_TERM_KEY, "0") or "0")
                except ValueError:
                    raise CorruptDataError(f"{path}: currTerm is not a number") from None
                state.curr_vote_for = values.get(dfmt.VOTE_LEADER_KEY) or None
                break
        return state

    def persist_term(self) -> None:
        """``persistTerm``: ``voteLeader`` then ``currTerm`` (the order the Java 17 broker writes)."""
        self.home.mkdir(parents=True, exist_ok=True)
        text = f"{dfmt.VOTE_LEADER_KEY}={self.curr_vote_for or ''}\n{dfmt.CURR_TERM_KEY}={self.curr_term}\n"
        replace_file(self.term_file, text.encode("latin-1"), backup=True)

    def is_quorum(self, count: int) -> bool:
        return count >= len(self.peers) // 2 + 1

    def is_peer(self, ident: str | None) -> bool:
        return ident is not None and ident in self.peers

    def set_vote_for(self, ident: str) -> None:
        self.curr_vote_for = ident
        self.persist_term()

    def next_term(self) -> int:
        """``nextTerm``: a candidate's next term (the largest it heard of, else one more), no vote."""
        if self.role is not Role.CANDIDATE:
            raise RuntimeError(f"next_term as {self.role.value}")
        self.curr_term = self.known_max_term if self.known_max_term > self.curr_term else self.curr_term + 1
        self.curr_vote_for = None
        self.persist_term()
        return self.curr_term

    def change_to_leader(self, term: int) -> None:
        if term != self.curr_term:
            raise RuntimeError(f"leader of term {term} in term {self.curr_term}")
        self.role, self.leader_id = Role.LEADER, self.self_id
        self.live.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        if term != self.curr_term:
            raise RuntimeError(f"follower of term {term} in term {self.curr_term}")
        self.role, self.leader_id, self.transferee = Role.FOLLOWER, leader_id, None

    def change_to_candidate(self, term: int) -> None:
        """``changeToCandidate``: the term is remembered as the largest known, not taken."""
        if term < self.curr_term:
            raise RuntimeError(f"candidate of term {term} in term {self.curr_term}")
        self.known_max_term = max(self.known_max_term, term)
        self.role, self.leader_id, self.transferee = Role.CANDIDATE, None, None
