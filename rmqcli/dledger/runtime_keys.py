"""The keys an rmq broker in DLedger mode adds to its runtime info (GET_BROKER_RUNTIME_INFO; 4.9.8
reports none of them): the member's Raft state, as ``rmq dledgerStatus`` reads it back."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqcli.dledger.node import DLedgerNode

# runtime-info key -> the field of ``rmq dledgerStatus``'s peer row it fills
RAFT_KEYS = {
    "dLedgerRole": "role",
    "dLedgerTerm": "term",
    "dLedgerLeaderId": "leader_id",
    "dLedgerBeginIndex": "begin_index",
    "dLedgerEndIndex": "end_index",
    "dLedgerEndTerm": "end_term",
    "dLedgerCommittedIndex": "committed_index",
}
TEXT_FIELDS = ("role", "leader_id")  # the others are integers


def raft_table(node: DLedgerNode) -> dict[str, str]:
    """The runtime-info keys of ``node``'s state now."""
    state, ledger = node.state, node.ledger
    values: dict[str, object] = {
        "role": state.role.name,
        "term": state.curr_term,
        "leader_id": state.leader_id or "",
        "begin_index": ledger.begin_index,
        "end_index": ledger.end_index,
        "end_term": ledger.end_term,
        "committed_index": ledger.committed_index,
    }
    return {key: str(values[field]) for key, field in RAFT_KEYS.items()}
