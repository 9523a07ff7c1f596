"""A sent message's properties are stored in the order the real 4.9.8 broker stores them.

``SendMessageProcessor`` fills a ``HashMap`` from the client's string, adds ``CLUSTER``, removes
``WAIT`` and serialises the map: the table keeps the size it grew to with ``WAIT`` in it, so a
message whose map crossed a resize threshold (13 and 25 entries) is serialised in the order of
the larger table. The C++ client sends the same messages, with 0 to 26 user properties, to the
real broker and to ``rmq serve``; each message's stored properties must come in the same order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqcli.store.read.commitlog import Record
from rmqcli.store.store import Store
from tests.support.broker_drivers import run_driver
from tests.support.oracle import real_cluster
from tests.support.serve import ServeProcess, write_conf

pytestmark = [pytest.mark.java, pytest.mark.cpp]

TOPIC = "PropertyOrderTopic"
USER_PROPERTIES = {f"k{n}": n for n in range(27)}  # key -> how many user properties it carries


def _send(tmp: Path, name: str, namesrv: str) -> None:
    cmd = {
        "op": "produce",
        "namesrv": namesrv,
        "topic": TOPIC,
        "keys": list(USER_PROPERTIES),
        "user_properties": USER_PROPERTIES,
        "out": str(tmp / f"{name}.jsonl"),
    }
    events = run_driver(tmp, name, cmd, timeout=120)
    assert [e["status"] for e in events if "key" in e] == [0] * len(USER_PROPERTIES)


def _stored_orders(root: Path) -> dict[str, list[str]]:
    """Each message's property names in stored order, by its key."""
    store = Store.open(root)
    orders = {}
    for rec in store.commitlog.records():
        if isinstance(rec, Record) and rec.topic == TOPIC:
            orders[rec.properties["KEYS"]] = list(rec.properties)
    return orders


def test_sent_properties_are_stored_in_the_real_brokers_order(tmp_path: Path) -> None:
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster(home, autoCreateTopicEnable="true") as real:
        _send(tmp_path, "to-real", real.namesrv)
    with ServeProcess(tmp_path / "rmq", write_conf(tmp_path / "rmq.conf")) as served:
        _send(tmp_path, "to-rmq", served.namesrv)
    real_orders = _stored_orders(home / "store")
    rmq_orders = _stored_orders(tmp_path / "rmq")
    assert set(real_orders) == set(USER_PROPERTIES)
    for key, count in USER_PROPERTIES.items():
        assert len(real_orders[key]) == count + 4  # KEYS, TAGS, UNIQ_KEY, CLUSTER (WAIT is not stored)
        assert rmq_orders[key] == real_orders[key], key
