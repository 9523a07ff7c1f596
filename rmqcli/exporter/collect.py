"""One scrape of ``rmq exporter``: a round of admin requests to a cluster of any version, turned into
rocketmq-exporter's families (``metrics.md §4.3-§4.4``).

Unlike rocketmq-exporter (tasks once a minute into caches), every scrape asks the cluster now, and
within ``budget`` seconds: requests not sent by then are skipped and counted
(``rmq_exporter_scrape_errors{kind="deadline"}``), each request waits at most the session's timeout.
Per broker ``rmq_exporter_broker_up`` says whether it answered its runtime request (a broker that
did not answer has no other series). Requests (protocol.md B.2-B.4): 106 cluster info; 28 runtime
table of every broker; 315 broker, topic and group statistics to each master; 206 topic list;
per topic 105 route, 202 offsets, 300 consuming groups; per group 208 consume stats and 203
connections.

Left out (rmq's choice, said in the README): ``rocketmq_group_get_latency_by_storetime`` (a pull
per queue every scrape), the client families (GET_CONSUMER_RUNNING_INFO forwarded to every client),
``rocketmq_producer_count`` (GET_ALL_PRODUCER_INFO), and the three families rocketmq-exporter
never fills.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.names import DLQ_PREFIX, RETRY_PREFIX
from rmqcli.errors import BrokerError, NetworkError, RmqError
from rmqcli.exporter import families as f
from rmqcli.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqcli.admin.session import AdminSession
    from rmqcli.remoting.json_body import TopicRouteData

MASTER_ID = 0
CLUSTERING = "1"  # MessageModel.CLUSTERING.ordinal(), rocketmq-exporter's msgModel label


@dataclass(frozen=True)
class Sample:
    family: f.Family
    labels: tuple[str, ...]  # the family's label values, in its order
    value: float


@dataclass
class Scrape:
    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, family: f.Family, value: float, *labels: object) -> None:
        self.samples.append(Sample(family, tuple(str(v) for v in labels), float(value)))


class _OutOfTime(Exception):
    pass


@dataclass
class _Broker:
    cluster: str
    name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] | None = None


class Collector:
    """One round over the cluster the session's name servers know."""

    def __init__(self, session: AdminSession, budget: float):
        self.session = session
        self.deadline = time.monotonic() + budget
        self.scrape = Scrape()
        self.counted: set[str] = set()

    def run(self) -> Scrape:
        started = time.monotonic()
        try:
            self._round()
        except _OutOfTime:
            self.scrape.errors["deadline"] += 1
        except NetworkError:  # no name server answered
            self.scrape.errors["namesrv"] += 1
        self.scrape.seconds = time.monotonic() - started
        return self.scrape

    # --- the requests -----------------------------------------------------------------------------
    def _time(self) -> None:
        if time.monotonic() >= self.deadline:
            raise _OutOfTime

    def _call(self, addr: str, code: int, header: object = None):  # type: ignore[no-untyped-def]
        """One request; None (counted) when it failed."""
        self._time()
        try:
            return self.session.call(addr, code, header)
        except NetworkError:
            self.scrape.errors["network"] += 1
        except BrokerError:
            self.scrape.errors["broker"] += 1
        return None

    def _round(self) -> None:
        session = self.session
        session._cluster_info = None  # fresh each scrape
        info = session.cluster_info()
        brokers = [
            _Broker(cluster, name, broker_id, data.broker_addrs[broker_id])
            for cluster in sorted(info.cluster_addr_table)
            for name in sorted(info.cluster_addr_table[cluster])
            if (data := info.broker_addr_table.get(name)) is not None
            for broker_id in sorted(data.broker_addrs)
        ]
        self.first_cluster = brokers[0].cluster if brokers else ""
        self.cluster_of = {b.name: b.cluster for b in brokers}
        self._runtime(brokers)
        masters = [b for b in brokers if b.broker_id == MASTER_ID and b.runtime is not None]
        for b in masters:
            self._broker_stats(b)
        self._topics()

    def _runtime(self, brokers: list[_Broker]) -> None:
        from rmqcli.admin.broker import runtime_tables

        self._time()
        tables = runtime_tables(self.session, [b.addr for b in brokers])
        for b, table in zip(brokers, tables, strict=True):
            up = not isinstance(table, RmqError)
            self.scrape.add(f.BROKER_UP, 1 if up else 0, b.cluster, b.addr, b.name)
            if not up:
                self.scrape.errors["network" if isinstance(table, NetworkError) else "broker"] += 1
                continue
            b.runtime = table
        by_name = {b.name: b for b in brokers if b.broker_id == MASTER_ID}
        for b in brokers:
            if b.runtime is None:
                continue
            if b.broker_id == MASTER_ID:
                labels = (b.cluster, b.addr, "", b.runtime.get("brokerVersionDesc", ""),
                          b.runtime.get("bootTimestamp", ""), b.runtime.get("brokerVersion", ""))  # fmt: skip
                for suffix, value in f.runtime_values(b.runtime).items():
                    self.scrape.add(f.RUNTIME_FAMILIES[suffix], value, *labels)
                continue
            master = by_name.get(b.name)
            if master is not None and master.runtime is not None:
                diff = int(master.runtime.get("commitLogMaxOffset", 0)) - int(
                    b.runtime.get("commitLogMaxOffset", 0)
                )
                self.scrape.add(f.COMMITLOG_DIFF, diff, b.cluster, b.addr, b.name)

    def _stats(self, addr: str, name: str, key: str):  # type: ignore[no-untyped-def]
        """VIEW_BROKER_STATS_DATA (315): the minute item, None when the broker has none."""
        from rmqcli.admin.group.stats import broker_stats

        self._time()
        try:
            return broker_stats(self.session, addr, name, key).stats_minute
        except BrokerError:  # SYSTEM_ERROR "The stats <...> not exist": none yet, not a failure
            return None
        except NetworkError:
            self.scrape.errors["network"] += 1
            return None

    def _broker_stats(self, b: _Broker) -> None:
        for family, item in ((f.BROKER_TPS, "BROKER_PUT_NUMS"), (f.BROKER_QPS, "BROKER_GET_NUMS")):
            minute = self._stats(b.addr, item, b.cluster)
            if minute is not None:
                self.scrape.add(family, round(minute.tps, 2), b.cluster, b.addr, b.name)

    def _topics(self) -> None:
        from rmqcli.remoting import json_body as jb

        self._time()
        response = self.session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        for topic in sorted(jb.decode_or_empty(jb.TopicList, response.body).topic_list):
            self._time()
            try:
                route = self.session.route(topic)
            except BrokerError:
                self.scrape.errors["broker"] += 1
                continue
            self._topic_offsets(topic, route)
            if not topic.startswith(DLQ_PREFIX):
                self._topic_groups(topic, route)

    def _masters(self, route: TopicRouteData) -> list[tuple[str, str]]:
        return [
            (d.broker_name, d.broker_addrs[MASTER_ID])
            for d in route.broker_datas
            if MASTER_ID in d.broker_addrs
        ]

    def _topic_offsets(self, topic: str, route: TopicRouteData) -> None:
        from rmqcli.remoting import headers as hd
        from rmqcli.remoting import json_body as jb

        for broker, addr in self._masters(route):
            response = self._call(
                addr, RequestCode.GET_TOPIC_STATS_INFO, hd.GetTopicStatsInfoRequestHeader(topic=topic)
            )
            if response is None:
                continue
            table = jb.decode_or_empty(jb.TopicStatsTable, response.body)
            total = sum(o.max_offset for o in table.offset_table.values())
            if topic.startswith(DLQ_PREFIX):
                self.scrape.add(
                    f.TOPIC_DLQ_OFFSET, total, self.first_cluster, broker, topic[len(DLQ_PREFIX) :]
                )
            elif topic.startswith(RETRY_PREFIX):
                self.scrape.add(f.TOPIC_RETRY_OFFSET, total, self.first_cluster, broker, topic)
            else:
                self.scrape.add(f.PRODUCER_OFFSET, total, self.first_cluster, broker, topic)
                cluster = self.cluster_of.get(broker, self.first_cluster)
                for family, item in ((f.PRODUCER_TPS, "TOPIC_PUT_NUMS"), (f.PRODUCER_SIZE, "TOPIC_PUT_SIZE")):
                    minute = self._stats(addr, item, topic)
                    if minute is not None:
                        self.scrape.add(family, round(minute.tps, 2), cluster, broker, topic)

    def _topic_groups(self, topic: str, route: TopicRouteData) -> None:
        from rmqcli.admin.group.clients import consumer_connection
        from rmqcli.admin.group.progress import consume_stats
        from rmqcli.admin.group.subscription import consuming_groups

        self._time()
        try:
            groups = consuming_groups(self.session, topic, route)
        except (BrokerError, NetworkError) as exc:
            self.scrape.errors["network" if isinstance(exc, NetworkError) else "broker"] += 1
            return
        for group in sorted(groups):
            self._time()
            try:
                connection = consumer_connection(self.session, group)
                online, model = connection.connection_set, connection.message_model
            except (BrokerError, NetworkError):  # CONSUMER_NOT_ONLINE: none online, clustering
                online, model = [], "CLUSTERING"
            if model == "BROADCASTING":
                continue
            if online and group not in self.counted:  # once per group (its consumers, whatever the topic)
                self.counted.add(group)
                caddr = ",".join(c.client_addr for c in online)
                self.scrape.add(
                    f.GROUP_COUNT, len(online), caddr, ",".join(c.client_id for c in online), group
                )
            try:
                progress = consume_stats(self.session, group, topic)
            except (BrokerError, NetworkError):
                continue
            rows = [r for r in progress.rows if r.topic == topic]
            family = f.GROUP_RETRY_DIFF if topic.startswith(RETRY_PREFIX) else f.GROUP_DIFF
            diff = sum(max(r.broker_offset - r.consumer_offset, 0) for r in rows)
            self.scrape.add(family, diff, group, topic, len(online), CLUSTERING)
            if topic.startswith(RETRY_PREFIX):
                continue
            self._group_brokers(group, topic, rows, route)

    def _group_brokers(self, group: str, topic: str, rows: list, route: TopicRouteData) -> None:  # type: ignore[type-arg]
        for broker, addr in self._masters(route):
            offset = sum(r.consumer_offset for r in rows if r.broker_name == broker)
            self.scrape.add(f.CONSUMER_OFFSET, offset, self.first_cluster, broker, topic, group)
            cluster = self.cluster_of.get(broker, self.first_cluster)
            key = f"{topic}@{group}"
            for family, item in ((f.CONSUMER_TPS, "GROUP_GET_NUMS"), (f.CONSUMER_SIZE, "GROUP_GET_SIZE")):
                minute = self._stats(addr, item, key)
                if minute is not None:
                    self.scrape.add(family, round(minute.tps, 2), cluster, broker, topic, group)
            minute = self._stats(addr, "SNDBCK_PUT_NUMS", key)
            if minute is not None:
                self.scrape.add(f.SEND_BACK, minute.sum, cluster, broker, topic, group)


def render(scrape: Scrape, names: frozenset[str] | None = None) -> str:
    """The Prometheus text of a scrape: the exporter's families in its order, then the runtime
    families, then rmq's own; ``# HELP`` and ``# TYPE gauge`` before each family with samples."""
    from rmqcli.metrics.registry import escape_label, java_double

    by_family: dict[f.Family, list[Sample]] = {}
    for sample in scrape.samples:
        by_family.setdefault(sample.family, []).append(sample)
    scrape_families = [f.SCRAPE_SECONDS, f.SCRAPE_ERRORS]
    order = [*f.ORDER, *f.RUNTIME_FAMILIES.values(), f.BROKER_UP, *scrape_families]
    extra = [Sample(f.SCRAPE_SECONDS, (), round(scrape.seconds, 3))]
    extra += [Sample(f.SCRAPE_ERRORS, (kind,), n) for kind, n in sorted(scrape.errors.items())]
    for sample in extra:
        by_family.setdefault(sample.family, []).append(sample)
    lines = []
    for family in order:
        samples = by_family.get(family)
        if not samples or (names is not None and family.name not in names):
            continue
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} gauge"]
        for s in samples:
            labels = ",".join(
                f'{k}="{escape_label(v)}"' for k, v in zip(family.labels, s.labels, strict=True)
            )
            lines.append(
                f"{family.name}{{{labels}}} {java_double(s.value)}"
                if labels
                else f"{family.name} {java_double(s.value)}"
            )
    return "\n".join(lines) + "\n"
