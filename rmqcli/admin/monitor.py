"""startMonitoring: 4.9.8's ``MonitorService`` with ``DefaultMonitorListener`` (tools ``monitor``).

Each round (first after ``delay`` seconds, then every ``interval``, at a fixed rate): the topic
list of the name server (206); for every ``%RETRY%G`` topic, group ``G``:

- ``reportUndoneMsgs``: the group's consume stats (105 + 208) and its connection (105 + 203; an
  offline group is skipped), then per topic of the stats ``UndoneMsgs``: the sum of the positive
  ``brokerOffset - consumerOffset``, the largest of them, and the largest ``storeTimestamp`` of the
  queue's last message (GET_MAX_OFFSET (30), then PULL_MESSAGE (11) of ``max - 1`` as
  ``TOOLS_CONSUMER``) minus the queue's ``lastTimestamp``, for queues with a ``lastTimestamp``;
- ``reportConsumerRunningInfo``: GET_CONSUMER_RUNNING_INFO (307) of each member at version
  ``V3_1_8_SNAPSHOT`` or later, checked with ``ConsumerRunningInfo.analyzeSubscription`` and
  ``analyzeProcessQueue``; only findings are reported (``[NOTIFY]``).

Failures inside a group are skipped, as MonitorService swallows them. Between rounds the monitor is
the push consumer ``__MONITOR_CONSUMER`` of ``OFFSET_MOVED_EVENT`` (and of its retry topic, as
every clustering push consumer): heartbeats (34) every 30 s, pulls from its committed offsets (14,
11, 15) every few seconds, and each event (a 4.9.8 broker writes one when a pull asked for an
offset outside the queue) is ``reportDeleteMsgsEvent``; it answers the broker's
GET_CONSUMER_RUNNING_INFO for itself and unregisters (35) when it stops.

Every report goes to ``listener`` as a ``Report`` carrying ``DefaultMonitorListener``'s text (what
mqadmin writes to its client log only). Bounded: pulls of at most ``PULL_BATCH`` messages, at most
``MAX_BATCHES`` of them per queue and poll.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from formats.javatext import parse_boolean
from formats.names import CLIENT_INNER_PRODUCER, OFFSET_MOVED_EVENT, RETRY_PREFIX
from rmqcli.admin.beans import ConsumerRunningInfo, mq_key, mq_string
from rmqcli.admin.session import AdminSession
from rmqcli.errors import BrokerError, NetworkError, RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode
from rmqcli.remoting.json_body import MessageQueue, bean, prop

if TYPE_CHECKING:
    from rmqcli.admin.group.progress import ProgressRow
    from rmqcli.admin.mqclient import PullConsumer
    from rmqcli.remoting.codec import RemotingCommand

MONITOR_CONSUMER = "__MONITOR_CONSUMER"  # MixAll.MONITOR_CONSUMER_GROUP
V3_1_8_SNAPSHOT = 62  # MQVersion ordinal: older clients cannot answer 307
ROUND_INTERVAL = 60.0  # MonitorConfig.roundInterval
FIRST_DELAY = 20.0  # MonitorService.startScheduleTask's initial delay
HEARTBEAT_SECONDS = 30.0  # ClientConfig.heartbeatBrokerInterval
POLL_SECONDS = 2.0
PULL_BATCH = 32  # DefaultMQPushConsumer.pullBatchSize
MAX_BATCHES = 64
PREFIX = "[MONITOR] "
NOTIFY = PREFIX + " [NOTIFY] "
BANNER = "=" * 41


# --- what is reported ----------------------------------------------------------------------------
@dataclass
class UndoneMsgs:
    consumer_group: str
    topic: str
    undone_msgs_total: int = 0
    undone_msgs_single_mq: int = 0
    undone_msgs_delay_time_mills: int = 0

    def java_string(self) -> str:
        return (
            f"UndoneMsgs [consumerGroup={self.consumer_group}, topic={self.topic}, "
            f"undoneMsgsTotal={self.undone_msgs_total}, undoneMsgsSingleMQ={self.undone_msgs_single_mq}, "
            f"undoneMsgsDelayTimeMills={self.undone_msgs_delay_time_mills}]"
        )


@bean
class OffsetMovedEvent:
    """The body of an ``OFFSET_MOVED_EVENT`` message (``OffsetMovedEvent``)."""

    consumer_group: str | None = prop(None)
    message_queue: MessageQueue | None = prop(None)
    offset_request: int = prop(0)
    offset_new: int = prop(0)


@dataclass
class DeleteMsgsEvent:
    offset_moved_event: OffsetMovedEvent
    event_timestamp: int  # the event message's storeTimestamp

    def java_string(self) -> str:
        e = self.offset_moved_event
        mq = "null" if e.message_queue is None else mq_string(e.message_queue)
        return (
            f"DeleteMsgsEvent [offsetMovedEvent=OffsetMovedEvent [consumerGroup={e.consumer_group}, "
            f"messageQueue={mq}, offsetRequest={e.offset_request}, offsetNew={e.offset_new}], "
            f"eventTimestamp={self.event_timestamp}]"
        )


@dataclass
class Report:
    """One line of ``DefaultMonitorListener`` (or MonitorService's own log line): ``kind`` is
    ``beginRound``, ``reportUndoneMsgs``, ``reportDeleteMsgsEvent``, ``reportConsumerRunningInfo``,
    ``endRound``, ``roundSpent`` or ``roundFailed``; ``detail`` the reported values."""

    kind: str
    timestamp: int
    text: str
    detail: dict[str, Any] = field(default_factory=dict)


Listener = Callable[[Report], None]


def _now() -> int:
    return int(time.time() * 1000)


# --- ConsumerRunningInfo's checks ----------------------------------------------------------------
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_START = "PROP_CONSUMER_START_TIMESTAMP"
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")


def _is_push(info: ConsumerRunningInfo) -> bool:
    """``ConsumeType.valueOf(PROP_CONSUME_TYPE) == CONSUME_PASSIVELY``; a missing or unknown type
    raises ``ValueError`` as Java's ``valueOf`` (or the cast of null) throws."""
    kind = info.properties.get(PROP_CONSUME_TYPE)
    if kind not in CONSUME_TYPES:
        raise ValueError(f"no ConsumeType {kind!r}")
    return kind == "CONSUME_PASSIVELY"


def analyze_subscription(infos: dict[str, ConsumerRunningInfo], now: int) -> bool:
    """``ConsumerRunningInfo.analyzeSubscription`` over the members sorted by client id: a push
    group started more than 2 minutes ago must have the same subscriptions (``TreeSet.equals``:
    ``topic@subString``) in every member, and not none. Missing properties raise ``ValueError``."""
    ordered = [infos[k] for k in sorted(infos)]
    first = ordered[0]
    push = _is_push(first)
    started = int(first.properties.get(PROP_START, "null"))  # Long.parseLong("null") throws too
    if push and now - started > 2 * 60 * 1000:
        keys = [{f"{s.topic}@{s.sub_string}" for s in info.subscription_set} for info in ordered]
        if any(k != keys[0] for k in keys):
            return False
        if not keys[-1]:
            return False
    return True


def analyze_process_queue(client_id: str, info: ConsumerRunningInfo, now: int) -> str:
    """``ConsumerRunningInfo.analyzeProcessQueue``: for a push consumer, per queue (sorted), an
    orderly queue not locked or failing to unlock, a concurrent queue holding messages without a
    consume for more than a minute; one ``%n``-ended line each."""
    if not _is_push(info):
        return ""
    orderly = parse_boolean(info.properties.get(PROP_CONSUME_ORDERLY))
    out = []
    for mq in sorted(info.mq_table, key=mq_key):
        pq = info.mq_table[mq]
        if orderly:
            if not pq.locked:
                out.append(
                    f"{client_id} {mq_string(mq)} can't lock for a while, {now - pq.last_lock_timestamp}ms\n"
                )
            elif pq.droped and pq.try_unlock_times > 0:
                out.append(f"{client_id} {mq_string(mq)} unlock {pq.try_unlock_times} times, still failed\n")
        else:
            diff = now - pq.last_consume_timestamp
            if diff > 60 * 1000 and pq.cached_msg_count > 0:
                out.append(
                    f"{client_id} {mq_string(mq)} can't consume for a while, maybe blocked, {diff}ms\n"
                )
    return "".join(out)


# --- the monitor ---------------------------------------------------------------------------------
def java_hash_name(namesrv: str) -> str:
    """``MonitorService.instanceName``: ``MonitorService_`` + the ``hashCode`` of millis plus a
    random int, then the name server address, as a string."""
    from formats.javahash import string_hash

    seed = _now() + random.randint(-(1 << 31), (1 << 31) - 1)
    return f"MonitorService_{string_hash(f'{seed}{namesrv}')}"


class MonitorService:
    """The rounds and the ``__MONITOR_CONSUMER`` consumer over one ``AdminSession``."""

    def __init__(self, session: AdminSession, listener: Listener):
        from rmqcli.admin.mqclient import PullConsumer, local_ip

        self.session = session
        self.listener = listener
        self.tools = PullConsumer(session)  # TOOLS_CONSUMER, for the delay of the last message
        self.events = EventConsumer(
            session, listener, f"{local_ip()}@{java_hash_name(';'.join(session.namesrv))}"
        )
        self.failure: RmqError | None = None  # the last round's failure, None when it ran

    def _report(self, kind: str, text: str, **detail: Any) -> None:
        self.listener(Report(kind, _now(), text, detail))

    # --- one round ---------------------------------------------------------------------------
    def round(self) -> None:
        """``doMonitorWork``: a failure of the topic list ends the round (no ``endRound``)."""
        from formats.javahash import hashmap_order
        from rmqcli.remoting import json_body as jb

        begin = _now()
        self.tools.routes.clear()  # fetched again each round
        self._report("beginRound", PREFIX + BANNER + "beginRound")
        try:
            response = self.session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            topics = jb.decode_or_empty(jb.TopicList, response.body).topic_list
        except RmqError as exc:
            self.failure = exc
            self._report("roundFailed", f"doMonitorWork Exception: {exc}", error=str(exc))
            return
        self.failure = None
        for topic in hashmap_order(topics):
            if not topic.startswith(RETRY_PREFIX):
                continue
            group = topic[len(RETRY_PREFIX) :]
            for step in (self.report_undone_msgs, self.report_consumer_running_info):
                try:
                    step(group)
                except (RmqError, ValueError, KeyError, TypeError):
                    pass
        self._report("endRound", PREFIX + BANNER + "endRound")
        spent = _now() - begin
        self._report(
            "roundSpent", f"Execute one round monitor work, spent timemills: {spent}", spentMillis=spent
        )

    def report_undone_msgs(self, group: str) -> None:
        """``reportUndoneMsgs``: nothing unless the group has consume stats and is online."""
        from formats.javahash import hashmap_order
        from rmqcli.admin.group import consume_stats, consumer_connection

        stats = consume_stats(self.session, group)
        consumer_connection(self.session, group)
        by_topic: dict[str, list[ProgressRow]] = {}
        for row in stats.rows:
            by_topic.setdefault(row.topic, []).append(row)
        for topic in hashmap_order(list(by_topic)):
            undone = self.compute_undone_msgs(group, topic, by_topic[topic])
            self._report(
                "reportUndoneMsgs",
                f"{PREFIX}reportUndoneMsgs: {undone.java_string()}",
                consumerGroup=group,
                topic=topic,
                undoneMsgsTotal=undone.undone_msgs_total,
                undoneMsgsSingleMQ=undone.undone_msgs_single_mq,
                undoneMsgsDelayTimeMills=undone.undone_msgs_delay_time_mills,
            )

    def compute_undone_msgs(self, group: str, topic: str, rows: list[ProgressRow]) -> UndoneMsgs:
        """``computeUndoneMsgs``."""
        undone = UndoneMsgs(group, topic)
        for row in rows:
            diff = row.broker_offset - row.consumer_offset
            undone.undone_msgs_single_mq = max(undone.undone_msgs_single_mq, diff)
            undone.undone_msgs_total += max(diff, 0)
            if row.last_timestamp > 0:
                delay = self._last_message_delay(row)
                undone.undone_msgs_delay_time_mills = max(undone.undone_msgs_delay_time_mills, delay)
        return undone

    def _last_message_delay(self, row: ProgressRow) -> int:
        """The store time of the queue's last message minus ``lastTimestamp``; 0 when unknown."""
        mq = MessageQueue(broker_name=row.broker_name, queue_id=row.queue_id, topic=row.topic)
        try:
            high = self.tools.max_offset(mq)
            if high <= 0:
                return 0
            pulled = self.tools.pull(mq, "*", high - 1, 1)
        except RmqError:
            return 0
        if pulled.status != "FOUND" or not pulled.messages:
            return 0
        return pulled.messages[0].store_timestamp - row.last_timestamp

    def report_consumer_running_info(self, group: str) -> None:
        """``reportConsumerRunningInfo`` and ``DefaultMonitorListener``'s checks of the answers."""
        from rmqcli.admin.group import consumer_connection, running_info

        connection = consumer_connection(self.session, group)
        infos: dict[str, ConsumerRunningInfo] = {}
        for conn in connection.connection_set:
            if conn.version < V3_1_8_SNAPSHOT:
                continue
            try:
                infos[conn.client_id] = running_info(self.session, group, conn.client_id)
            except (BrokerError, NetworkError):
                continue
        if not infos:
            return
        now = _now()
        first = infos[min(infos)]
        name = first.properties.get("consumerGroup", "null")
        if not analyze_subscription(infos, now):
            self._report(
                "reportConsumerRunningInfo",
                f"{NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {name}, Subscription different",
                consumerGroup=name,
                finding="Subscription different",
            )
        for client_id in sorted(infos):
            found = analyze_process_queue(client_id, infos[client_id], now)
            if found:
                self._report(
                    "reportConsumerRunningInfo",
                    f"{NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {name}, ClientId: {client_id}, "
                    + found,
                    consumerGroup=name,
                    clientId=client_id,
                    finding=found.rstrip("\n"),
                )

    # --- the schedule ------------------------------------------------------------------------
    def run(self, rounds: int = 0, interval: float = ROUND_INTERVAL, delay: float = FIRST_DELAY) -> None:
        """Rounds at a fixed rate (the first after ``delay``) until ``rounds`` are done (0: for
        ever); the event consumer works in between and after the last round once more."""
        self.events.start()
        try:
            due = time.monotonic() + max(delay, 0.0)
            done = 0
            while True:
                self._wait(due)
                self.round()
                done += 1
                self.events.work()
                if rounds and done >= rounds:
                    return
                due = max(due + max(interval, 0.0), time.monotonic())
        finally:
            self.events.shutdown()

    def _wait(self, due: float) -> None:
        while True:
            self.events.work()
            left = due - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, POLL_SECONDS))


class EventConsumer:
    """The push consumer ``__MONITOR_CONSUMER`` of ``OFFSET_MOVED_EVENT`` (``*``), clustering,
    from the last offset, one thread; each message is one ``reportDeleteMsgsEvent``."""

    def __init__(self, session: AdminSession, listener: Listener, client_id: str):
        from rmqcli.admin.mqclient import PullConsumer

        self.session = session
        self.listener = listener
        self.client_id = client_id
        self.puller: PullConsumer = PullConsumer(session, MONITOR_CONSUMER)
        self.offsets: dict[tuple[str, str, int], tuple[MessageQueue, int]] = {}
        self.addrs: list[str] = []
        self.last_heartbeat = float("-inf")
        self.started = _now()
        self.last_pull = 0
        self.last_consume = 0

    def start(self) -> None:
        self.session.client.client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._running_info)
        self.work()

    def work(self) -> None:
        """Heartbeat when due, then pull what is new; failures wait for the next turn."""
        try:
            if time.monotonic() - self.last_heartbeat >= HEARTBEAT_SECONDS:
                self._heartbeat()
            self._poll()
        except RmqError:
            pass

    def _heartbeat(self) -> None:
        from rmqcli.remoting import json_body as jb

        self.puller.routes.clear()  # routes are fetched again every heartbeat
        route = self.puller.route(OFFSET_MOVED_EVENT)
        self.addrs = [a for d in route.broker_datas for _, a in sorted(d.broker_addrs.items())]
        data = jb.HeartbeatData(
            client_id=self.client_id,
            consumer_data_set=[
                jb.ConsumerData(
                    group_name=MONITOR_CONSUMER,
                    consume_type="CONSUME_PASSIVELY",
                    message_model="CLUSTERING",
                    consume_from_where="CONSUME_FROM_LAST_OFFSET",
                    subscription_data_set=self._subscriptions(),
                )
            ],
            producer_data_set=[jb.ProducerData(group_name=CLIENT_INNER_PRODUCER)],
        )
        for addr in self.addrs:
            try:
                self.session.call(addr, RequestCode.HEART_BEAT, body=jb.encode(data))
            except RmqError:
                continue
        self.last_heartbeat = time.monotonic()

    def _subscriptions(self) -> list[Any]:
        from rmqcli.remoting import json_body as jb

        return [
            jb.SubscriptionData(topic=topic, sub_string="*", sub_version=self.started)
            for topic in (OFFSET_MOVED_EVENT, RETRY_PREFIX + MONITOR_CONSUMER)
        ]

    def _start_offset(self, mq: MessageQueue) -> int:
        """``computePullFromWhere`` (CONSUME_FROM_LAST_OFFSET): the committed offset, else 0 for
        the retry topic and the queue's max offset for the others."""
        addr = self.puller.addr(mq)
        header = hd.QueryConsumerOffsetRequestHeader(
            consumer_group=MONITOR_CONSUMER, topic=mq.topic, queue_id=mq.queue_id
        )
        answer = self.session.call(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            header,
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if answer.code == ResponseCode.SUCCESS:
            return int(answer.ext_fields.get("offset", "0"))
        return 0 if mq.topic.startswith(RETRY_PREFIX) else self.puller.max_offset(mq)

    def _poll(self) -> None:
        """Both subscriptions, as the push consumer pulls them (its retry topic may not exist yet);
        every queue's offset is committed, as ``persistAll`` does every 5 s."""
        for topic in (OFFSET_MOVED_EVENT, RETRY_PREFIX + MONITOR_CONSUMER):
            try:
                queues = self.puller.queues(topic)
            except RmqError:
                self.puller.routes.pop(topic, None)
                continue
            for mq in queues:
                self._poll_queue(mq)

    def _poll_queue(self, mq: MessageQueue) -> None:
        key = mq_key(mq)
        if key not in self.offsets:
            self.offsets[key] = (mq, self._start_offset(mq))
        offset = self.offsets[key][1]
        for _ in range(MAX_BATCHES):  # each answer moves to its nextBeginOffset (moved, too)
            pulled = self.puller.pull(mq, "*", offset, PULL_BATCH)
            self.last_pull = _now()
            for msg in pulled.messages:
                self._deliver(msg)
            offset = pulled.next_begin_offset
            if pulled.status != "FOUND":
                break
        self.offsets[key] = (mq, offset)
        self._commit(mq, offset)

    def _deliver(self, msg: Any) -> None:
        from rmqcli.remoting import json_body as jb

        self.last_consume = _now()
        try:
            event = jb.decode(OffsetMovedEvent, msg.body)
        except RmqError:
            return  # MonitorService drops what does not decode
        deleted = DeleteMsgsEvent(event, msg.store_timestamp)
        mq = event.message_queue
        self.listener(
            Report(
                "reportDeleteMsgsEvent",
                _now(),
                f"{PREFIX}reportDeleteMsgsEvent: {deleted.java_string()}",
                {
                    "consumerGroup": event.consumer_group,
                    "topic": mq.topic if mq else None,
                    "brokerName": mq.broker_name if mq else None,
                    "queueId": mq.queue_id if mq else None,
                    "offsetRequest": event.offset_request,
                    "offsetNew": event.offset_new,
                    "eventTimestamp": msg.store_timestamp,
                },
            )
        )

    def _commit(self, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET (15), as the push consumer persists its offsets."""
        header = hd.UpdateConsumerOffsetRequestHeader(
            consumer_group=MONITOR_CONSUMER,
            topic=mq.topic,
            queue_id=mq.queue_id,
            commit_offset=offset,
            bname=mq.broker_name,
        )
        try:
            self.session.call(self.puller.addr(mq), RequestCode.UPDATE_CONSUMER_OFFSET, header)
        except RmqError:
            pass

    def _running_info(self, request: RemotingCommand, addr: str) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO for this consumer (``DefaultMQPushConsumerImpl.consumerRunningInfo``)."""
        from rmqcli.admin.beans import ProcessQueueInfo
        from rmqcli.remoting import json_body as jb

        info = ConsumerRunningInfo(
            properties={
                "consumerGroup": MONITOR_CONSUMER,
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "consumeThreadMin": "1",
                "consumeThreadMax": "1",
                "pullBatchSize": str(PULL_BATCH),
                PROP_CONSUME_ORDERLY: "false",
                PROP_CONSUME_TYPE: "CONSUME_PASSIVELY",
                "PROP_THREADPOOL_CORE_SIZE": "1",
                PROP_START: str(self.started),
                "PROP_NAMESERVER_ADDR": ";".join(self.session.namesrv),
            },
            subscription_set=self._subscriptions(),
            mq_table={
                mq: ProcessQueueInfo(
                    commit_offset=offset,
                    last_pull_timestamp=self.last_pull,
                    last_consume_timestamp=self.last_consume,
                )
                for mq, offset in sorted(self.offsets.values(), key=lambda item: mq_key(item[0]))
            },
        )
        return request.response(ResponseCode.SUCCESS, body=jb.encode(info))

    def shutdown(self) -> None:
        """``unregisterClient`` for the consumer group and the inner producer, quietly."""
        for addr in self.addrs:
            for header in (
                hd.UnregisterClientRequestHeader(client_id=self.client_id, consumer_group=MONITOR_CONSUMER),
                hd.UnregisterClientRequestHeader(
                    client_id=self.client_id, producer_group=CLIENT_INNER_PRODUCER
                ),
            ):
                try:
                    self.session.call(addr, RequestCode.UNREGISTER_CLIENT, header)
                except RmqError:
                    break
