"""``useServerSideResetOffset`` (RocketMQ 5.1.1) in ``rmq serve`` beside the real 5.1.1 broker
(``../shared/rocketmq-5.1.1``): INVOKE_BROKER_TO_RESET_OFFSET is kept by the broker, not sent to
clients. The same requests go to both brokers, and every answer must be the same:

- an orderly POP group whose queue is blocked by a batch it has not acked: after a reset to offset
  1 the queue is no longer blocked, and the next POP starts at 1; the ack of the old batch does not
  move the offset back;
- a pull group: QUERY_CONSUMER_OFFSET answers the reset before any pull took it, a consumer's
  UPDATE_CONSUMER_OFFSET is ignored meanwhile ("Offset has been previously reset"), the next pull
  is PULL_OFFSET_MOVED to the reset offset, the one after that is served from the reset offset;
- the refusals: an unknown topic or group, an offset outside the queue; a reset of every queue by
  timestamp (-1: the max offset).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from formats import fastjson
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.admin.test_admin_attributes_real import mqadmin
from tests.support import popwire as w
from tests.support.cli import invoke_rmq
from tests.support.oracle5 import kit5_env, real_cluster5
from tests.support.serve import ServeProcess, write_conf

SETTING = {"useServerSideResetOffset": "true"}


def reset(a: str, topic: str, group: str, *, queue_id: int | None = None, offset: int | None = None,
          timestamp: int = -1) -> tuple[int, str | None, Any]:  # fmt: skip
    header: dict[str, Any] = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": True}
    if queue_id is not None:
        header["queueId"] = queue_id
    if offset is not None:
        header["offset"] = offset
    resp = w.call(a, RC.INVOKE_BROKER_TO_RESET_OFFSET, header)
    table = fastjson.loads(resp.body) if resp.body else None
    return resp.code, resp.remark, table


def pull(a: str, group: str, topic: str, offset: int) -> tuple[int, str | None, str, list[bytes]]:
    header = {
        "consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0,
    }  # fmt: skip
    resp = w.call(a, RC.PULL_MESSAGE, header)
    bodies = [rec.body() for rec in w.records(resp.body)] if resp.code == RS.SUCCESS else []
    return resp.code, resp.remark, resp.ext_fields["nextBeginOffset"], bodies


def update_offset(a: str, group: str, topic: str, offset: int) -> tuple[int, str | None]:
    header = {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": offset}
    resp = w.call(a, RC.UPDATE_CONSUMER_OFFSET, header)
    return resp.code, resp.remark


def scenario(a: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    w.filled(a, "TopicR", [f"r{i}".encode() for i in range(5)])

    # orderly POP: a reset ends the block of a batch not acked
    first = w.pop(a, "GR", "TopicR", invisible=30000, order=True)
    seen["order.pop"] = (first.code, first.ext_fields["msgOffsetInfo"])
    blocked = w.pop(a, "GR", "TopicR", invisible=30000, order=True)
    seen["order.blocked"] = (blocked.code, blocked.remark)
    seen["order.reset"] = reset(a, "TopicR", "GR", queue_id=0, offset=1)
    seen["order.offset.pending"] = w.query_offset(a, "GR", "TopicR", 0)
    after = w.pop(a, "GR", "TopicR", invisible=30000, order=True)
    seen["order.after"] = (after.code, after.ext_fields.get("msgOffsetInfo"))
    seen["order.offset.taken"] = w.query_offset(a, "GR", "TopicR", 0)
    old = w.popped(first, "TopicR", "GR")
    seen["order.ack.old"] = w.ack(a, "GR", old[-1]).code
    seen["order.offset.after_old_ack"] = w.query_offset(a, "GR", "TopicR", 0)

    # a pull group (its first pull creates it)
    seen["pull.first"] = pull(a, "GP", "TopicR", 0)
    seen["pull.commit"] = update_offset(a, "GP", "TopicR", 4)
    seen["pull.reset"] = reset(a, "TopicR", "GP", queue_id=0, offset=2)
    seen["pull.offset.pending"] = w.query_offset(a, "GP", "TopicR", 0)
    seen["pull.commit.pending"] = update_offset(a, "GP", "TopicR", 4)
    seen["pull.moved"] = pull(a, "GP", "TopicR", 4)
    seen["pull.next"] = pull(a, "GP", "TopicR", 4)
    seen["pull.commit.after"] = update_offset(a, "GP", "TopicR", 5)
    seen["pull.offset.after"] = w.query_offset(a, "GP", "TopicR", 0)

    # refusals, and every queue by time
    seen["no_topic"] = reset(a, "NoSuchTopic", "GP", queue_id=0, offset=1)
    seen["no_group"] = reset(a, "TopicR", "NoSuchGroup", queue_id=0, offset=1)
    seen["out_of_range"] = reset(a, "TopicR", "GP", queue_id=0, offset=99)
    seen["all_queues"] = reset(a, "TopicR", "GP")
    seen["all_queues.moved"] = pull(a, "GP", "TopicR", 2)
    return seen


@pytest.mark.java
@pytest.mark.java5
def test_server_side_offset_reset_matches_the_real_broker(tmp_path: Path) -> None:
    (tmp_path / "rmq").mkdir()
    with ServeProcess(tmp_path / "rmq" / "store", write_conf(tmp_path / "broker.conf", **SETTING)) as server:
        ours = scenario(server.broker)
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster5(home, **SETTING) as real:
        theirs = scenario(real.broker)
    # the scenario reaches what it is about: the block ended, the pull moved, the commit ignored
    assert theirs["order.after"] == (RS.SUCCESS, "0 0 1,2,3,4")
    assert theirs["pull.moved"][:3] == (RS.PULL_OFFSET_MOVED, "OFFSET_RESET", "2")
    assert theirs["pull.commit.pending"] == (RS.SUCCESS, "Offset has been previously reset")
    differ = {key: (ours.get(key), theirs[key]) for key in theirs if ours.get(key) != theirs[key]}
    assert differ == {}


@pytest.mark.java
@pytest.mark.java5
def test_one_queue_reset_by_mqadmin_5_and_by_rmq(tmp_path: Path) -> None:
    """5.1.1's ``resetOffsetByTime -b -q -o`` against ``rmq serve``, then rmq's: the same two lines,
    and each time the queue's next pull is moved to the offset given."""
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf", **SETTING)) as server:
        a, n = server.broker, server.namesrv
        w.filled(a, "TopicQ", [f"q{i}".encode() for i in range(5)])
        assert pull(a, "GQ", "TopicQ", 0)[0] == RS.SUCCESS  # creates the group
        for offset, run in (("2", "mqadmin"), ("3", "rmq")):
            args = ("resetOffsetByTime", "-n", n, "-g", "GQ", "-t", "TopicQ", "-s", "1700000000000")
            args += ("-b", a, "-q", "0", "-o", offset)
            if run == "mqadmin":
                out = mqadmin(kit5_env(tmp_path), *args)
            else:
                result = invoke_rmq(*args, check=True)
                out = result.stdout
            assert out.endswith(  # mqadmin's JVM may print notices first
                "start reset consumer offset by specified, group[GQ], topic[TopicQ], queueId[0], "
                f"broker[{a}], timestamp(string)[1700000000000], timestamp(long)[1700000000000]\n"
                f"reset consumer offset to {offset}\n"
            ), (run, out)
            assert w.query_offset(a, "GQ", "TopicQ", 0) == int(offset)
            assert pull(a, "GQ", "TopicQ", 5)[:3] == (RS.PULL_OFFSET_MOVED, "OFFSET_RESET", offset), run
