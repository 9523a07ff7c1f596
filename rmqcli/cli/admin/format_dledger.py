"""Text of ``dledgerStatus`` and ``leadershipTransfer`` (``rmqcli.cli.admin.dledger``)."""

from __future__ import annotations

from typing import Any

COLUMNS = ("#BrokerName", "#Group", "#SelfId", "#PeerAddr", "#BrokerAddr", "#Role", "#Term", "#LeaderId",
           "#EndIndex", "#CommittedIndex", "#CommittedPos")  # fmt: skip


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def dledger_status(found: list[Any]) -> str:
    """One line per member; a member that did not answer shows its error in the role column."""
    rows = [COLUMNS]
    for group in found:
        for p in group.peers:
            role = p.role or ("UNREACHABLE" if p.error_kind == "network" else "ERROR")
            rows.append(
                (p.broker_name, p.group, p.self_id, p.peer_addr, _cell(p.broker_addr), role, _cell(p.term),
                 _cell(p.leader_id), _cell(p.end_index), _cell(p.committed_index), _cell(p.committed_pos))
            )  # fmt: skip
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(COLUMNS))]
    return "".join(
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows
    )


def leadership_transfer(done: dict[str, Any]) -> str:
    """DLedger's ``LeadershipTransfer code=...`` line."""
    return (
        f"LeadershipTransfer code={done['code']}, group {done['group']}: {done['from']} -> {done['to']}, "
        f"term {done['term']}\n"
    )
