"""mqadmin's clusterRT (4.9.8 ``tools.command.cluster.CLusterSendMsgRTCommand``): the send time
of every broker of the cluster(s), measured as a producer sends.

One round: for each cluster (``-c``, else every cluster of GET_BROKER_CLUSTER_INFO, asked once
for the whole run, in ``HashMap`` order) and each of its broker names (``HashSet`` order), one
message of ``size`` ``a``s to the topic named after the broker (the topic a broker creates at
start when ``brokerTopicEnable``), sent ``amount`` times with ``rmqcli.admin.mqclient.Producer``
(route 105, heartbeat 34, SEND_MESSAGE_V2 310 to the master, up to two retries, as
``DefaultMQProducer.send(msg)``). The same ``Message`` is sent each time, so every send of a
broker in a round carries the same ``UNIQ_KEY``. A send that raises counts as a failure, any
answer as a success; the average leaves the first send out: ``elapsed / (amount - 1)``
(NaN for one message, -0.0 for none). An unknown ``-c`` cluster ends the round with mqadmin's
``cluster [X] not exist``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from formats.javahash import hashmap_order
from rmqcli.admin.mqclient import OutMessage, Producer, UniqIdGenerator
from rmqcli.admin.session import AdminSession
from rmqcli.errors import BrokerError, NetworkError

MAX_BODY = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize (Validators.checkMessage)


@dataclass
class RtRow:
    """One broker's figures in one round."""

    cluster: str
    broker_name: str
    rt: float  # ms; NaN with one message, -0.0 with none
    success_count: int
    fail_count: int
    at_millis: int  # when the row was complete (mqadmin's tlog stamp)
    last_error: str | None = None


@dataclass
class RtRound:
    """One round: its number (from 1), the rows, and the unknown cluster that ended it, if any."""

    round: int
    rows: list[RtRow] = field(default_factory=list)
    missing_cluster: str | None = None


class _SameId:
    """The one ``UNIQ_KEY`` of a reused ``Message``: ``setUniqID`` sets it only when absent."""

    def __init__(self, text: str):
        self.text = text

    def next(self) -> str:
        return self.text


def _invalid(size: int) -> str | None:
    """``Validators.checkMessage`` of the body (the client refuses before sending)."""
    if size <= 0:
        return "the message body length is zero"
    if size > MAX_BODY:
        return f"the message body size over max value, MAX: {MAX_BODY}"
    return None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterRT:
    """The state of one run: the producer group (current millis, as mqadmin names it), the
    cluster table (asked once) and the rounds done."""

    def __init__(self, session: AdminSession, amount: int, size: int, cluster: str | None):
        self.session = session
        self.amount = amount
        self.size = size
        self.cluster = cluster.strip() if cluster else None
        self.group = str(_now_ms())
        self.rounds = 0
        self.ids = UniqIdGenerator()

    def targets(self) -> tuple[list[tuple[str, list[str]]], str | None]:
        """The clusters with their broker names, in mqadmin's order, and the unknown ``-c``."""
        table = self.session.cluster_info().cluster_addr_table
        if self.cluster is not None:
            names = table.get(self.cluster)
            if names is None:
                return [], self.cluster
            return [(self.cluster, hashmap_order(list(names)))], None
        return [(c, hashmap_order(list(table[c]))) for c in hashmap_order(list(table))], None

    def round(self) -> RtRound:
        self.rounds += 1
        clusters, missing = self.targets()
        result = RtRound(self.rounds, missing_cluster=missing)
        if not clusters:
            return result
        producer = Producer(self.session, self.group)
        try:
            for cluster, brokers in clusters:
                for broker in brokers:
                    result.rows.append(self._broker(producer, cluster, broker))
        finally:
            producer.close()
        return result

    def _broker(self, producer: Producer, cluster: str, broker: str) -> RtRow:
        message = OutMessage(topic=broker, body=b"a" * max(self.size, 0))
        producer.ids = _SameId(self.ids.next())  # type: ignore[assignment]
        refused = _invalid(self.size)
        success = fail = elapsed = 0
        error = None
        for i in range(self.amount):
            start = _now_ms()
            try:
                if refused:
                    raise BrokerError(refused)
                producer.send(message)
                success += 1
            except (BrokerError, NetworkError) as exc:
                fail += 1
                error = str(exc)
            if i:
                elapsed += _now_ms() - start
        divisor = self.amount - 1
        rt = elapsed / divisor if divisor else float("nan")  # 0 / -1 is -0.0, as in Java
        return RtRow(cluster, broker, rt, success, fail, _now_ms(), error)


def cluster_rt(
    session: AdminSession, state: dict[str, ClusterRT], amount: int, size: int, cluster: str | None
) -> RtRound:
    """One round of ``clusterRT``; ``state`` keeps the run's ``ClusterRT`` between rounds."""
    runner = state.get("run")
    if runner is None:
        runner = state["run"] = ClusterRT(session, amount, size, cluster)
    return runner.round()
