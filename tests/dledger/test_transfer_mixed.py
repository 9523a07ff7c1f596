"""Leadership transfer between rmq's ``DLedgerNode`` (n0) and two real 4.9.8 brokers (n1, n2) whose
broker.conf says ``preferredLeaderId=n0``:

- the Java leader elected before rmq's node starts hands the leadership to n0 once it is live and
  level (its log: ``preferredLeaderId = n0 ... decided to be transferee`` and ``transfer finished``
  with code 200); rmq leads the next term and the Java members follow it;
- rmq, as leader, told to prefer n2, hands the leadership to the Java n2 (n2 is elected in the next
  term, rmq follows it); told to prefer n0 again, n2 hands it back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.components import require
from tests.support.dledger import DATA_FILE_SIZE, RmqMember, dledger_group
from tests.support.serve import wait_until

pytestmark = pytest.mark.java

# DLedgerServer.checkPreferredLeader's last line: the transferee's answer (``toString`` of the beans)
_FINISHED = re.compile(
    r"transfer finished\. request=.*?,response=LeadershipTransferResponse\{[^}]*code=(\d+)[^}]*term=(\d+)\}"
)


def test_leadership_moves_to_the_preferred_member_both_ways(tmp_path: Path) -> None:
    require("java")
    with dledger_group(tmp_path, java=("n1", "n2"), extra={"preferredLeaderId": "n0"}) as g:
        first = g.leader()  # a Java leader before rmq's node exists
        rmq = RmqMember(g.store("n0"), "n0", g.peers, data_file_size=DATA_FILE_SIZE, preferred=("n0",))
        rmq.start()
        try:
            term, _ = wait_until(
                lambda: rmq.view() if (rmq.view() or (0, ""))[1] == "n0" else None, 60, "n0 to lead"
            )
            # the Java leader writes its line once rmq's answer is back, after rmq leads
            finished = wait_until(lambda: re.findall(_FINISHED, g.log(first)), 20, "the transfer line")
            assert "preferredLeaderId = n0, which has the smallest fall behind index" in g.log(first)
            assert finished[-1] == ("200", str(term)), finished  # rmq's answer: it leads that term
            for n in ("n1", "n2"):  # the Java members follow n0 in rmq's term
                line = f"[{n}][ChangeRoleToFollower] from term: {term} leaderId: n0"
                wait_until(lambda n=n, line=line: line in g.log(n), 20, f"{n} following n0")

            node = rmq.node
            assert node is not None
            rmq.run(lambda: setattr(node.transfer, "preferred", ("n2",)))
            term2, _ = wait_until(
                lambda: rmq.view() if (rmq.view() or (0, ""))[1] == "n2" else None, 60, "n2 to lead"
            )
            assert term2 > term  # term + 1, or more when n2's first vote timed out (a loaded machine)
            elected = f"[n2] [VOTE_RESULT] has been elected to be the leader in term {term2}"
            wait_until(lambda: elected in g.log("n2"), 20, "n2's election line")
            # n2 answers the transfer once it leads; the line is written after the answer
            wait_until(lambda: "LEADERSHIP_TRANSFER FINISHED" in g.log("n2"), 20, "n2's transfer line")

            rmq.run(lambda: setattr(node.transfer, "preferred", ("n0",)))  # n2 prefers n0 (its broker.conf)
            term3, _ = wait_until(
                lambda: rmq.view() if (rmq.view() or (0, ""))[1] == "n0" else None, 60, "n0 again"
            )
            assert term3 > term2
        finally:
            rmq.stop()
