"""One ``rmq serve`` alone in its DLedger group (its selfId the only peer: its own vote is the
majority): it is elected and registers as brokerId 0; once it leads, the
services of a master run, as 4.9.8's ``changeToMaster`` starts them: a delayed message (level 1)
and a 5.x timer message are both delivered to their topic after their time. Its log is
``dledger-n0/`` (an entry's record at the entry's position + 48), nothing in ``commitlog/``."""

from __future__ import annotations

from pathlib import Path

from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store import Store
from tests.broker.test_timer_serve import delivered, tsend
from tests.support.dledger import GROUP
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

TOPIC = "TopicTimer"  # tsend's


def test_a_lone_member_leads_and_runs_the_masters_services(rmq, tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "n0.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
        dLegerPeers=f"n0-127.0.0.1:{free_port()}", dLegerSelfId="n0", mappedFileSizeCommitLog=str(1 << 20),
        messageDelayLevel="1s 2s",
    )  # fmt: skip
    with ServeProcess(tmp_path / "store", conf, ["--verbose"]) as s:
        wait_until(lambda: "now SYNC_MASTER, brokerId 0" in s.output(), 20, "the election")
        made = rmq("updateTopic", "-n", s.namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "1", "-w", "1")
        assert made.exit_code == 0, made.stdout + made.stderr
        timer = tsend(s.broker, {"UNIQ_KEY": "U-TIMER", "TIMER_DELAY_SEC": "2"})
        delayed = tsend(s.broker, {"UNIQ_KEY": "U-DELAY", "DELAY": "1"})
        assert (timer.code, delayed.code) == (RS.SUCCESS, RS.SUCCESS)
        assert delivered(s.broker) == []
        wait_until(
            lambda: {r.properties.get("UNIQ_KEY") for r in delivered(s.broker)} == {"U-TIMER", "U-DELAY"},
            20, "both delivered",
        )  # fmt: skip
        assert s.stop() == 0
    assert not list((tmp_path / "store" / "commitlog").glob("0*"))
    store = Store.open(tmp_path / "store")
    try:
        records = list(store.commitlog.records())
        assert records and all(
            r.physical_offset == store.commitlog.record_extra(r)["entryPos"] + 48 for r in records
        )
    finally:
        store.close()
