"""Elections in a group of rmq's ``DLedgerNode`` (n0, in this process) and two real 4.9.8 brokers
in DLedger mode (n1, n2): the three agree on one leader of one term, whoever it is; the leader is
killed (the Java one with SIGKILL, rmq's node closed) and the two others agree on a new one in a
later term; the killed member comes back and follows. Rounds go on until rmq has led Java
followers and followed a Java leader (after three Java wins in a row the Java leader hands over to
rmq by LEADERSHIP_TRANSFER instead of being killed: a member that notices the dead leader first
loses the race, and rmq's often does), each seen in the Java logs (``ChangeRoleToFollower`` to n0,
``[VOTE_RESULT] has been elected``) and in rmq's state; ``currterm`` of every member then names
the same term on every running member."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rmqcli.dledger import protocol as dp
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import SyncClient
from tests.support.components import require
from tests.support.dledger import RmqMember
from tests.support.oracle import KIT, LOADED_MACHINE, Jvm, broker_port, kit_env
from tests.support.serve import free_port

pytestmark = pytest.mark.java

GROUP = "RaftNode00"
JAVA = ("n1", "n2")
_ELECTED = re.compile(r"\[(n\d)\] \[VOTE_RESULT\] has been elected to be the leader in term (\d+)")
_FOLLOWS = re.compile(r"\[(n\d)\]\[ChangeRoleToFollower\] from term: (\d+) leaderId: (n\d)")


class JavaMember:
    def __init__(self, home: Path, name: str, conf: dict[str, str]):
        self.home, self.name = home / name, name
        self.home.mkdir(parents=True)
        (self.home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.jvm: Jvm | None = None
        self.states: list[Path] = []

    def start(self) -> None:
        env = kit_env(self.home)
        self.states.append(Path(env["ORACLE_STATE_DIR"]))
        log = self.home / f"broker-{time.monotonic_ns()}.out"
        self.jvm = Jvm([str(KIT / "bin" / "broker"), "-c", str(self.home / "broker.conf")], log, env)

    def kill(self) -> None:
        if self.jvm is not None:
            self.jvm.proc.kill()
            self.jvm.proc.wait(20)
            self.jvm = None

    def log(self) -> str:
        """This start's DLedger log lines (``broker_default.log``)."""
        return "\n".join(
            p.read_text(errors="replace") for p in sorted((self.states[-1] / "logs").rglob("*.log"))
        )

    def view(self) -> tuple[int, str] | None:
        """(term, leader) of this start's last election line (elected, or following)."""
        last: tuple[int, int, str] | None = None  # (position, term, leader)
        text = self.log()
        for m in _ELECTED.finditer(text):
            last = max(last or (-1, 0, ""), (m.start(), int(m.group(2)), m.group(1)))
        for m in _FOLLOWS.finditer(text):
            last = max(last or (-1, 0, ""), (m.start(), int(m.group(2)), m.group(3)))
        return (last[1], last[2]) if last else None


def hand_over(addr: str, leader: str, transferee: str, term: int) -> int:
    """LEADERSHIP_TRANSFER to the leader at ``addr``: the DLedger code it answers."""
    req = dp.LeadershipTransferRequest(
        group=GROUP,
        remote_id=leader,
        leader_id=leader,
        term=term,
        transfer_id=leader,
        transferee_id=transferee,
    )
    with SyncClient() as client:
        answer = client.invoke(addr, dp.request_command(dp.DLedgerRequestCode.LEADERSHIP_TRANSFER, req), 10)
    return jb.decode(dp.LeadershipTransferResponse, answer.body).code


def agreed(rmq: RmqMember, java: dict[str, JavaMember], timeout: float = 90) -> tuple[int, str]:
    """The (term, leader) every running member agrees on, waited for."""
    deadline = time.monotonic() + timeout
    while True:
        views = [m.view() for m in java.values() if m.jvm is not None]
        if rmq.node is not None:
            views.append(rmq.view())
        if views and None not in views and len(set(views)) == 1:
            term, leader = views[0]  # type: ignore[misc]
            alive = {n for n, m in java.items() if m.jvm is not None} | ({"n0"} if rmq.node else set())
            if leader in alive:
                return term, leader
        assert time.monotonic() < deadline, (
            f"no agreement: rmq {rmq.view()}, java { {n: m.view() for n, m in java.items()} }"
        )
        time.sleep(0.3)


def test_rmq_and_java_members_elect_and_follow_each_other(tmp_path: Path) -> None:
    require("java")
    raft = {n: free_port() for n in ("n0", *JAVA)}
    peers = {n: f"127.0.0.1:{p}" for n, p in raft.items()}
    text = ";".join(f"{n}-{a}" for n, a in peers.items())
    java = {
        n: JavaMember(tmp_path, n, {
            "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "listenPort": str(broker_port()),
            "namesrvAddr": f"127.0.0.1:{free_port()}", "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(tmp_path / n / "store"), "mappedFileSizeCommitLog": str(1 << 20),
            "enableDLegerCommitLog": "true", "dLegerGroup": GROUP, "dLegerPeers": text, "dLegerSelfId": n,
            "diskMaxUsedSpaceRatio": "95", **LOADED_MACHINE,
        })
        for n in JAVA
    }  # fmt: skip
    rmq = RmqMember(tmp_path / "n0", "n0", peers)
    seen = {"rmq led": False, "rmq followed": False}
    last_term = -1
    try:
        rmq.start()
        for m in java.values():
            m.start()
        for _round in range(8):
            term, leader = agreed(rmq, java)  # the member started again follows the leader of the last term
            assert term == last_term or last_term < 0
            last_term = term
            if leader == "n0":
                seen["rmq led"] = True
                assert all(m.view() == (term, "n0") for m in java.values())  # ChangeRoleToFollower to n0
                rmq.stop()
            else:
                seen["rmq followed"] = True
                assert rmq.view() == (term, leader)
                if _round >= 3 and not seen["rmq led"]:
                    # whoever notices a dead leader first is refused (REJECT_ALREADY_HAS_LEADER) and
                    # waits a heartbeat timeout more: after Java wins in a row, the Java leader hands
                    # the leadership to n0 instead, which then campaigns in the next term
                    assert hand_over(peers[leader], leader, "n0", term) == dp.SUCCESS
                    last_term, leader2 = agreed(rmq, java)
                    assert last_term > term and leader2 == "n0"
                    continue
                java[leader].kill()
            if all(seen.values()):
                break
            term2, leader2 = agreed(rmq, java)  # the two left elect a new leader in a later term
            assert term2 > term and leader2 != leader
            last_term = term2
            if leader == "n0":
                rmq.start()
            else:
                java[leader].start()
        assert all(seen.values()), seen
        final_term, _ = agreed(rmq, java)
        files = [rmq.ledger_home / "currterm"] if rmq.node is not None else []
        files += [
            tmp_path / n / "store" / f"dledger-{n}" / "currterm" for n in JAVA if java[n].jvm is not None
        ]
        assert len(files) == 2  # the killed leader's is left as it was
        assert {f.read_text().splitlines()[-1] for f in files} == {f"currTerm={final_term}"}
    finally:
        rmq.stop()
        for m in java.values():
            m.kill()
