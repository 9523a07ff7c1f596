"""``rmq serve``'s Prometheus metrics beside the real RocketMQ 5.1.1 broker's
(``../shared/rocketmq-5.1.1``, ``metricsExporterType=PROM``): the same load from the C++ client on
both (normal sends consumed by a push group, a few rejected once and consumed again from the retry
topic, delay-level sends, a producer online while scraped) and, over rmq's remoting client, a few
things the C++ client cannot do (timer sends, a POP and its ACKs, a send-back to the DLQ); then each
broker scraped while its clients are online and after they left. Compared: the families the real
broker writes (name, TYPE, HELP), the label-key sets of their series, the counters of the load, what
the real broker counts for its own services (schedule deliveries, revive reads), and the exposition
layout of docs/metrics.md §2.2. Each broker's two scrapes are kept in its temporary directory
(``online.prom``, ``after.prom``) beside the drivers' output."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.broker_drivers import Driver, run_driver, start_consumer
from tests.support.oracle5 import real_cluster5
from tests.support.ports import claim
from tests.support.prom import FIRST_SIX, get, prom_conf, samples, value
from tests.support.serve import LEVELS, ServeProcess, wait_until

pytestmark = [pytest.mark.java5, pytest.mark.cpp]

TOPIC, GROUP = "TopicMetricsDiff", "CG_METRICS_DIFF"  # sent to and consumed by a push group
# "warm" first (the topic exists when the consumer starts), the f's last, each sent once the one
# before was consumed: answered RECONSUME_LATER once, each goes back through SCHEDULE_TOPIC_XXXX to
# %RETRY%GROUP alone (the C++ client sends back every message of the pull a rejected one came in)
KEYS = ["warm"] + [f"m{i}" for i in range(20)] + ["f0", "f1"]
FAIL = KEYS[-2:]
DELAY_TOPIC = "TopicMetricsDelay"  # delay-level sends, not consumed
DELAYED = ["d0", "d1", "d2"]  # level 1: 1 s on both brokers (messageDelayLevel=LEVELS)
TIMER_TOPIC = "TopicMetricsTimer"  # TIMER_DELAY_SEC sends: the timer wheel's families
POP_TOPIC, POP_GROUP = "TopicMetricsPop", "GP_METRICS_DIFF"  # popped, acked, one sent to the DLQ
LOAD_TOPIC = "TopicMetricsLoad"  # a producer online while scraped (rocketmq_producer_connections)
# both brokers: delays and retries of a second, so the retries are seen within the module's budget
SETTINGS = {"messageDelayLevel": LEVELS}

# Families the real broker writes under this load that rmq does not export yet: the histogram of
# the pop buffer's scans (metrics.md §3.11; rmq has no PopBufferMergeService loop to time). This
# must equal exactly what rmq lacks: a family rmq starts exporting has to leave the list.
NOT_YET = {"rocketmq_pop_buffer_scan_time_consume"}

# family -> label-key sets the real broker shows that rmq is not meant to (none so far)
KEYS_NOT_YET: dict[str, set[frozenset[str]]] = {}

IGNORED_KEYS = {"otel_scope_name", "le"}  # every sample's scope; a bucket's bound
META = re.compile(r"^# (TYPE|HELP) (\S+) ?(.*)$")


@dataclass
class Scrapes:
    online: str  # consumer and a producer connected, every message consumed and committed
    after: str  # the clients gone
    content_type: str
    received: list[dict]  # the consumer's events


def scrape(port: int) -> tuple[str, str]:
    _, headers, body = get(port)
    return body.decode(), {k.lower(): v for k, v in headers.items()}["content-type"]


def wire_extras(broker: str) -> None:
    """What the C++ client cannot send: two 1 s timers; two messages popped and acked by a POP
    group, then one of them sent back to the group's DLQ (a negative delay level)."""
    assert w.create_topic(broker, TIMER_TOPIC, 1).code == RS.SUCCESS
    for i in range(2):
        timer = {"UNIQ_KEY": f"T{i}{time.time_ns()}", "TIMER_DELAY_SEC": "1"}
        assert tsend(broker, timer, topic=TIMER_TOPIC).code == RS.SUCCESS
    w.filled(broker, POP_TOPIC, [b"p0", b"p1"])
    got = w.pop_until(broker, POP_GROUP, POP_TOPIC, 2, invisible=1000)
    assert [p.body for p in got] == [b"p0", b"p1"]
    for p in got:
        assert w.ack(broker, POP_GROUP, p).code == RS.SUCCESS
    back = hd.ConsumerSendMsgBackRequestHeader(
        offset=got[1].rec.physical_offset, group=POP_GROUP, delay_level=-1, origin_topic=POP_TOPIC
    )
    assert w.call(broker, RC.CONSUMER_SEND_MSG_BACK, back).code == RS.SUCCESS


def run_load(tmp: Path, namesrv: str, broker: str, port: int) -> Scrapes:
    """The load of the module docstring against the broker ``broker`` (its NameServer ``namesrv``)
    whose metrics are on ``port``."""
    wire_extras(broker)
    produce = {"op": "produce", "namesrv": namesrv, "topic": TOPIC}
    warm = run_driver(tmp, "warm", {**produce, "keys": KEYS[:1]})
    assert [e["status"] for e in warm if "key" in e] == [0]
    consumer = start_consumer(
        tmp, "consume", {"op": "consume", "namesrv": namesrv, "group": GROUP, "topic": TOPIC, "fail": FAIL}
    )
    load = None
    try:
        consumer.wait_for(lambda ev: any(e.get("key") == "warm" for e in ev), 60, "the first message")
        sent = run_driver(tmp, "produce", {**produce, "keys": KEYS[1:-2]})
        consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(KEYS[:-2]), 60, "the m's")
        sent += run_driver(tmp, "fail", {**produce, "keys": FAIL, "after": str(consumer.out)})
        delay = {**produce, "topic": DELAY_TOPIC, "keys": DELAYED, "delay": 1}
        sent += run_driver(tmp, "delay", delay)
        assert [e["status"] for e in sent if "key" in e] == [0] * (len(KEYS) - 1 + len(DELAYED))

        def all_received(events: list[dict]) -> bool:
            keys = {e.get("key") for e in events}
            retried = {e.get("key") for e in events if e.get("times", 0) >= 1}
            return keys >= set(KEYS) and retried >= set(FAIL)

        consumer.wait_for(all_received, 90, "every message, and the rejected ones again")
        load = Driver(tmp, "load", {"op": "load", "namesrv": namesrv, "topic": LOAD_TOPIC, "prefix": "l"})
        load.wait_for(lambda ev: any("id" in e for e in ev), 60, "a load send")

        def settled() -> bool:  # the offsets committed (every 5 s), the producer's heartbeat came
            text = scrape(port)[0]
            lag = value(text, "rocketmq_consumer_lag_messages", consumer_group=GROUP, topic=TOPIC)
            return lag == 0 and value(text, "rocketmq_producer_connections", language="cpp") == 1

        wait_until(settled, 40, "lag 0 and the producer connected", 0.5)
        online, content_type = scrape(port)
    finally:
        if load is not None:
            load.stop()
        received = consumer.stop()
    wait_until(
        lambda: value(scrape(port)[0], "rocketmq_consumer_connections") is None, 30, "clients gone", 0.5
    )
    after = scrape(port)[0]
    (tmp / "online.prom").write_text(online)  # kept beside the drivers' output, as evidence
    (tmp / "after.prom").write_text(after)
    return Scrapes(online, after, content_type, received)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Scrapes:
    home = tmp_path_factory.mktemp("real5")
    port = claim()
    prom = {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": str(port),
    }
    with real_cluster5(home, **prom, **SETTINGS) as cluster:
        return run_load(home, cluster.namesrv, cluster.broker, port)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Scrapes:
    tmp = tmp_path_factory.mktemp("rmq")
    port = claim()
    with ServeProcess(tmp / "store", prom_conf(tmp, port, **SETTINGS)) as server:
        return run_load(tmp, server.namesrv, server.broker, port)


# --- parsing ----------------------------------------------------------------------------------------
def families(text: str) -> dict[str, tuple[str, str]]:
    """name -> (TYPE, HELP) of every family written, ``target`` and ``otel_scope_info`` left out."""
    found: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        match = META.match(line)
        if match:
            found.setdefault(match.group(2), {})[match.group(1)] = match.group(3)
    return {
        name: (meta.get("TYPE", ""), meta.get("HELP", ""))
        for name, meta in found.items()
        if name not in ("target", "otel_scope_info")
    }


def family_of(sample: str, known: dict[str, tuple[str, str]]) -> str:
    if sample in known:
        return sample
    base = re.sub(r"_(count|sum|bucket)$", "", sample)
    assert known.get(base, ("",))[0] == "histogram", f"a sample of no family: {sample}"
    return base


def key_sets(*texts: str) -> dict[str, set[frozenset[str]]]:
    """family -> the label-key sets of its samples (scope and ``le`` left out), over ``texts``."""
    found: dict[str, set[frozenset[str]]] = {}
    for text in texts:
        known = families(text)
        for name, labels, _ in samples(text):
            keys = frozenset(labels) - IGNORED_KEYS
            found.setdefault(family_of(name, known), set()).add(keys)
    return found


def layout(text: str, content_type: str) -> dict[str, object]:
    """What metrics.md §2.2 fixes about a scrape, as facts to compare."""
    lines = text.splitlines()
    types = [i for i, line in enumerate(lines) if line.startswith("# TYPE ")]
    sample_lines = [line for line in lines[6:] if not line.startswith("#")]
    stamps = {line.rsplit(" ", 1)[1] for line in sample_lines}
    return {
        "content_type": content_type,
        "first six": lines[:6],
        "TYPE then HELP of the same family": all(
            lines[i + 1].startswith(f"# HELP {lines[i].split()[2]} ") for i in types
        ),
        "scope label first": all(
            line.split("{", 1)[1].startswith('otel_scope_name="broker-meter"') for line in sample_lines
        ),
        "one millisecond timestamp": len(stamps) == 1 and all(re.fullmatch(r"\d{13}", s) for s in stamps),
        "every sample stamped": all(len(line.split("} ", 1)[1].split(" ")) == 2 for line in sample_lines),
        "ends with a newline": text.endswith("\n"),
    }


# --- tests ----------------------------------------------------------------------------------------
def test_every_real_family_is_exported_with_its_type_and_help(real: Scrapes, ours: Scrapes):
    theirs = families(real.online) | families(real.after)
    mine = families(ours.online) | families(ours.after)
    assert set(theirs) - set(mine) == NOT_YET  # a family rmq now exports leaves NOT_YET
    differ = {n: {"real": theirs[n], "rmq": mine[n]} for n in set(theirs) & set(mine) if mine[n] != theirs[n]}
    assert differ == {}  # (TYPE, HELP)


def test_the_real_label_key_sets_are_exported(real: Scrapes, ours: Scrapes):
    theirs = key_sets(real.online, real.after)
    mine = key_sets(ours.online, ours.after)
    missing = {
        name: sorted(sorted(keys) for keys in sets - mine.get(name, set()))
        for name, sets in theirs.items()
        if name in mine and sets - mine[name]
    }
    expected = {name: sorted(sorted(keys) for keys in sets) for name, sets in KEYS_NOT_YET.items()}
    assert missing == expected


def counters(text: str, table: dict[str, tuple[str, dict[str, str]]]) -> dict[str, float | None]:
    return {what: value(text, name, **labels) for what, (name, labels) in table.items()}


IN, OUT = "rocketmq_messages_in_total", "rocketmq_messages_out_total"
USER = {"is_system": "false"}
# what the load leaves in the counters, and the connection of its consumer: (family, labels) -> value
LOAD = {
    "in TOPIC": ((IN, {"topic": TOPIC, "message_type": "normal", **USER}), len(KEYS)),
    "in TOPIC, every type": ((IN, {"topic": TOPIC, **USER}), len(KEYS)),
    "size samples TOPIC": (("rocketmq_message_size_count", {"topic": TOPIC, **USER}), len(KEYS)),
    "out TOPIC to GROUP": ((OUT, {"topic": TOPIC, "consumer_group": GROUP, **USER}), len(KEYS)),
    "GROUP's consumer": (
        (
            "rocketmq_consumer_connections",
            {"consumer_group": GROUP, "consume_mode": "push", "language": "cpp", **USER},
        ),
        1,
    ),
    # the store's rewrites (§3.3): delay levels and timers counted under the system topic they park in
    "in SCHEDULE_TOPIC_XXXX": ((IN, {"topic": "SCHEDULE_TOPIC_XXXX", "message_type": "delay"}), len(DELAYED)),
    "in rmq_sys_wheel_timer": ((IN, {"topic": "rmq_sys_wheel_timer", "message_type": "delay"}), 2),
    "timer enqueue TIMER_TOPIC": (("rocketmq_timer_enqueue_total", {"topic": TIMER_TOPIC}), 2),
    "timer dequeue TIMER_TOPIC": (("rocketmq_timer_dequeue_total", {"topic": TIMER_TOPIC}), 2),
    "in POP_TOPIC": ((IN, {"topic": POP_TOPIC, "message_type": "normal", **USER}), 2),
    "out POP_TOPIC to POP_GROUP": (
        (OUT, {"topic": POP_TOPIC, "consumer_group": POP_GROUP, "is_retry": "false", **USER}),
        2,
    ),
    "pop CK to the revive topic": (
        ("rocketmq_pop_revive_in_message_total", {"consumer_group": POP_GROUP, "revive_message_type": "CK"}),
        1,  # one checkpoint for the POP's two messages
    ),
    "pop ACKs to the revive topic": (
        ("rocketmq_pop_revive_in_message_total", {"consumer_group": POP_GROUP, "revive_message_type": "ACK"}),
        2,
    ),
    "to POP_GROUP's DLQ": (
        ("rocketmq_send_to_dlq_messages_total", {"consumer_group": POP_GROUP, "topic": POP_TOPIC, **USER}),
        1,
    ),
}


def test_the_counters_of_the_load_agree(real: Scrapes, ours: Scrapes):
    for s in (real, ours):
        assert sorted(e["key"] for e in s.received if e.get("times") == 0) == sorted(KEYS)
        assert sorted(e["key"] for e in s.received if e.get("times", 0) >= 1) == FAIL  # each retried once
    table = {what: series for what, (series, _) in LOAD.items()}
    expected = {what: n for what, (_, n) in LOAD.items()}
    assert counters(real.online, table) == expected
    assert counters(ours.online, table) == expected


# What the real broker counts for its own services' reads and re-puts (metrics.md §3.3, §3.4): a
# delay-level message delivered by the schedule service is counted again as incoming under its real
# topic (message_type "delay"), a consumer's retry too under %RETRY%<group>, and the schedule
# service's reads of SCHEDULE_TOPIC_XXXX as outgoing for SCHEDULE_CONSUMER; the pop revive
# service's reads of its revive topic are outgoing for CID_RMQ_SYS_REVIVE_GROUP (observed here; the
# real value depends on how often the service re-reads, so only its presence is compared).
SERVICES = {
    "in DELAY_TOPIC, delivered": (
        (IN, {"topic": DELAY_TOPIC, "message_type": "delay", **USER}),
        len(DELAYED),
    ),
    "in %RETRY%GROUP, delivered": (
        (IN, {"topic": f"%RETRY%{GROUP}", "message_type": "delay", **USER}),
        len(FAIL),
    ),
    "out SCHEDULE_TOPIC_XXXX to SCHEDULE_CONSUMER": (
        (OUT, {"topic": "SCHEDULE_TOPIC_XXXX", "consumer_group": "SCHEDULE_CONSUMER", "is_system": "true"}),
        len(DELAYED) + len(FAIL),
    ),
}
REVIVE_READS = {"topic": "rmq_sys_REVIVE_LOG_DefaultCluster", "consumer_group": "CID_RMQ_SYS_REVIVE_GROUP"}


def test_the_services_deliveries_are_counted_as_the_real_broker_counts_them(real: Scrapes, ours: Scrapes):
    table = {what: series for what, (series, _) in SERVICES.items()}
    expected: dict[str, object] = {what: n for what, (_, n) in SERVICES.items()}
    expected["revive topic read"] = True
    for s in (real, ours):  # the real broker first: what it shows is the reference
        revive = value(s.online, OUT, is_system="true", **REVIVE_READS)
        assert {**counters(s.online, table), "revive topic read": (revive or 0) > 0} == expected


def test_the_exposition_layout_is_the_real_one(real: Scrapes, ours: Scrapes):
    for theirs, mine in ((real.online, ours.online), (real.after, ours.after)):
        assert layout(mine, ours.content_type) == layout(theirs, real.content_type)
    assert layout(real.online, real.content_type) == {
        "content_type": "text/plain; version=0.0.4; charset=utf-8",
        "first six": FIRST_SIX,
        "TYPE then HELP of the same family": True,
        "scope label first": True,
        "one millisecond timestamp": True,
        "every sample stamped": True,
        "ends with a newline": True,
    }
