"""DLedger groups (RocketMQ 4.5+'s ``enableDLegerCommitLog``), which mqadmin has no command for:
``dledgerStatus``, every member's Raft state, and ``leadershipTransfer``, DLedger 0.3.1.2's own
command (``LeadershipTransferCommand``: ``-t`` transfereeId, ``--term``, ``-l`` leader)."""

from __future__ import annotations

from rmqcli.cli.admin.registry import Family, Lazy, cluster_name, fail_first, opt, required

groups = Lazy("rmqcli.admin.dledger")
group_text = Lazy("rmqcli.cli.admin.format_dledger")
DLEDGER = Family(groups, group_text, "dledger")

dledger_status = DLEDGER.command(
    "dledgerStatus",
    "Print every member of the DLedger groups: role, term, leader, end and committed index",
    (
        cluster_name("which cluster (default: every broker name the name server knows)"),
        opt("broker_name", "--brokerName", "-b", "one broker name (its DLedger group)"),
    ),
    fail=lambda found: fail_first([p for g in found for p in g.peers if p.error]),
)

leadership_transfer = DLEDGER.command(
    "leadershipTransfer",
    "Hand a DLedger group's leadership to another member (it leads from the next term)",
    (
        required("broker_name", "--brokerName", "-b", "the broker name (its DLedger group)"),
        required("transferee", "--transfereeId", "-t", "the selfId that is to lead"),
        opt("term", "--term", None, "the leader's current term (default: as the leader says)", int),
        opt("leader", "--leader", "-l", "the current leader's selfId (default: as the members say)"),
    ),
)
