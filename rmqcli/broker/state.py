"""Broker state besides messages: topics, subscription groups, consumer offsets, online clients, queue locks.

``TopicConfigManager``, ``SubscriptionGroupManager`` and ``ConsumerOffsetManager`` keep their tables in
the ``StoreWriter``'s config state, so ``config/topics.json``, ``subscriptionGroup.json`` and
``consumerOffset.json`` are written in the 4.9.x shapes (formats.md §5.3). ``ClientManager`` is
``ConsumerManager`` + ``ProducerManager`` (B.3 HEART_BEAT / UNREGISTER_CLIENT, channels expire after
120 s, A.7); ``LockManager`` is ``RebalanceLockManager`` (B.3 LOCK_BATCH_MQ, 60 s leases).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from formats.commitlog import tags_code
from formats.names import (  # noqa: F401 - also importable from here
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    SELF_TEST_TOPIC,
)
from rmqcli.broker.names import (  # noqa: F401 - the names' checks, also importable from here
    DLQ_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_PREFIX,
    TOPIC_MAX_LENGTH,
    validate_group,
    validate_topic,
)
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.server.connection import Connection
from rmqcli.store.write.config import subscription_group_config
from rmqcli.store.write.writer import StoreWriter

CLIENT_EXPIRED_SECONDS = 120.0
LOCK_LEASE_SECONDS = 60.0  # rebalanceLockMaxLiveTime


def is_writable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


class TopicConfigManager:
    """Topic configs in ``writer.config.topics`` (fastjson-shaped dicts of ``topics.json``)."""

    def __init__(self, writer: StoreWriter, on_change: Callable[[], None]):
        self.writer = writer
        self.on_change = on_change  # persist + re-register with the name servers

    @property
    def table(self) -> dict[str, dict]:
        return self.writer.config.topics

    def get(self, topic: str) -> dict | None:
        return self.table.get(topic)

    def put(
        self,
        topic: str,
        read_queue_nums: int,
        write_queue_nums: int,
        perm: int,
        *,
        order: bool = False,
        topic_sys_flag: int = 0,
        topic_filter_type: str = "SINGLE_TAG",
        attributes: dict[str, str] | None = None,
        notify: bool = True,
    ) -> dict:
        """``updateTopicConfig``: the new config, data version bumped. ``attributes`` (RocketMQ 5's,
        final, in ``HashMap`` order) come first as fastjson sorts a bean's keys; none, no key (a
        4.9.x ``TopicConfig``, byte for byte)."""
        config: dict = {"attributes": dict(attributes)} if attributes else {}
        config |= {
            "order": order,
            "perm": perm,
            "readQueueNums": read_queue_nums,
            "topicFilterType": topic_filter_type,
            "topicName": topic,
            "topicSysFlag": topic_sys_flag,
            "writeQueueNums": write_queue_nums,
        }
        self.table[topic] = config
        self.writer.config.topics_version.bump(self.writer.clock())
        if notify:
            self.on_change()
        return config

    def create_in_send(self, topic: str, default_topic: str, default_queue_nums: int) -> dict | None:
        """``createTopicInSendMessageMethod`` (B.6): inherit from ``default_topic`` if it has PERM_INHERIT."""
        current = self.get(topic)
        if current is not None:
            return current
        if validate_topic(topic):  # never a config, queue directory or record for such a name
            return None
        default = self.get(default_topic)
        if default is None or not default["perm"] & PERM_INHERIT:
            return None
        nums = max(1, min(default_queue_nums, default["writeQueueNums"]))
        return self.put(topic, nums, nums, default["perm"] & ~PERM_INHERIT, topic_sys_flag=0)

    def create_system(self, topic: str, queue_nums: int, perm: int = PERM_READ_WRITE) -> dict | None:
        """``createTopicInSendMessageBackMethod``: retry / DLQ topics; None for a name that fails
        ``validate_topic`` (a 4.9.8 broker creates the config, then its store refuses the message)."""
        current = self.get(topic)
        if current is not None:
            return current
        if validate_topic(topic):
            return None
        return self.put(topic, queue_nums, queue_nums, perm)

    def wrapper(self) -> jb.TopicConfigSerializeWrapper:
        """``TopicConfigSerializeWrapper`` for REGISTER_BROKER and GET_ALL_TOPIC_CONFIG."""
        version = self.writer.config.topics_version
        return jb.TopicConfigSerializeWrapper(
            data_version=jb.DataVersion(counter=version.counter, timestamp=version.timestamp),
            topic_config_table={name: jb.from_value(jb.TopicConfig, c) for name, c in self.table.items()},
        )


class SubscriptionGroupManager:
    """Subscription groups in ``writer.config.groups`` (``subscriptionGroup.json``)."""

    def __init__(self, writer: StoreWriter, auto_create: bool, on_change: Callable[[], None]):
        self.writer = writer
        self.auto_create = auto_create
        self.on_change = on_change

    def find(self, group: str) -> dict | None:
        """``findSubscriptionGroupConfig``: created with defaults when ``autoCreateSubscriptionGroup``
        and the name passes ``validate_group`` (as RocketMQ 5's ``findSubscriptionGroupConfig``)."""
        config = self.writer.config.groups.get(group)
        if config is None and self.auto_create and validate_group(group) is None:
            config = subscription_group_config(group)
            self.writer.config.groups[group] = config
            self.writer.config.groups_version.bump(self.writer.clock())
            self.on_change()
        return config


class ConsumerOffsetManager:
    """``offsetTable``: ``topic@group -> {queueId: offset}`` in ``writer.config.consumer_offsets``.

    With ``server_side_reset`` (5.1.1's ``useServerSideResetOffset``) an admin's offset reset is
    also kept apart until the queue's next pull or POP takes it (``resetOffsetTable``, in memory
    only): meanwhile ``query`` answers it, and the consumers' own commits do not replace it."""

    def __init__(self, writer: StoreWriter, server_side_reset: bool = False):
        self.writer = writer
        self.changed = False
        self.server_side_reset = server_side_reset
        self.resets: dict[str, dict[int, int]] = {}
        self.pulls: dict[str, dict[int, int]] = {}  # 5.1.1's pullOffsetTable (in memory only)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.writer.set_consumer_offset(topic, group, queue_id, offset)
        self.changed = True

    def commit_pull(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``commitPullOffset``: where the group's last pull of the queue ends (every pull answered)."""
        self.pulls.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def query_pull(self, group: str, topic: str, queue_id: int) -> int:
        """``queryPullOffset``: -1 when the group never pulled the queue here."""
        return self.pulls.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when there is none; a reset not yet taken first (``queryOffset``)."""
        key = f"{topic}@{group}"
        if self.server_side_reset:
            reset = self.resets.get(key, {}).get(queue_id)
            if reset is not None:
                return reset
        return self.writer.config.consumer_offsets.get(key, {}).get(queue_id, -1)

    def assign_reset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """``assignResetOffset``: keep the reset, and move the committed offset to it when the group
        has offsets of the topic."""
        if not topic or not group or queue_id < 0 or offset < 0:
            return
        key = f"{topic}@{group}"
        self.resets.setdefault(key, {})[queue_id] = offset
        if key in self.writer.config.consumer_offsets:
            self.commit(group, topic, queue_id, offset)

    def has_reset(self, topic: str, group: str, queue_id: int) -> bool:
        """``hasOffsetReset``."""
        return queue_id in self.resets.get(f"{topic}@{group}", {})

    def take_reset(self, topic: str, group: str, queue_id: int) -> int | None:
        """``queryThenEraseResetOffset``: the reset waiting for the queue, now forgotten."""
        key = f"{topic}@{group}"
        pending = self.resets.get(key)
        if pending is None:
            return None
        offset = pending.pop(queue_id, None)
        if not pending:
            del self.resets[key]
        return offset


@dataclass
class ClientChannel:
    """``ClientChannelInfo``: a client id on a connection."""

    client_id: str
    connection: Connection
    language: str
    version: int
    last_update: float = field(default_factory=time.monotonic)


@dataclass
class ConsumerGroupInfo:
    """``ConsumerGroupInfo``: members and the subscriptions their heartbeats announced."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, jb.SubscriptionData] = field(default_factory=dict)


def language_name(code: int) -> str:
    from formats.remoting import LanguageCode

    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


class ClientManager:
    """Online consumers and producers; tells a group's members when the member set changes."""

    def __init__(self, notify: Callable[[str, list[ClientChannel]], None]):
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[str, ClientChannel]] = {}
        self.notify = notify  # NOTIFY_CONSUMER_IDS_CHANGED to the given members

    def heartbeat(self, data: jb.HeartbeatData, conn: Connection, language: int, version: int) -> list[str]:
        """``ClientManageProcessor.heartBeat``: register; returns the consumer groups seen."""
        lang = language_name(language)
        groups = []
        for consumer in data.consumer_data_set:
            info = self.consumers.setdefault(consumer.group_name, ConsumerGroupInfo(consumer.group_name))
            info.consume_type = consumer.consume_type
            info.message_model = consumer.message_model
            info.consume_from_where = consumer.consume_from_where
            old = info.channels.get(data.client_id)
            changed = old is None or old.connection is not conn
            info.channels[data.client_id] = ClientChannel(data.client_id, conn, lang, version)
            new_subs = {s.topic: s for s in consumer.subscription_data_set}
            for topic, sub in new_subs.items():
                old_sub = info.subscriptions.get(topic)
                if old_sub is None or sub.sub_version > old_sub.sub_version:
                    info.subscriptions[topic] = sub
            for topic in list(info.subscriptions):
                if topic not in new_subs:
                    del info.subscriptions[topic]
            if changed:
                self.notify(info.group, list(info.channels.values()))
            groups.append(info.group)
        for producer in data.producer_data_set:
            self.producers.setdefault(producer.group_name, {})[data.client_id] = ClientChannel(
                data.client_id, conn, lang, version
            )
        return groups

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> None:
        if producer_group and producer_group in self.producers:
            self.producers[producer_group].pop(client_id, None)
            if not self.producers[producer_group]:
                del self.producers[producer_group]
        if consumer_group:
            info = self.consumers.get(consumer_group)
            if info is not None and info.channels.pop(client_id, None) is not None:
                self._removed(info)

    def _removed(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self.notify(info.group, list(info.channels.values()))
        else:
            del self.consumers[info.group]

    def drop(self, matches: Callable[[ClientChannel], bool]) -> None:
        """Remove every channel ``matches`` selects (closed connection, expiry)."""
        for info in list(self.consumers.values()):
            gone = [cid for cid, ch in info.channels.items() if matches(ch)]
            for cid in gone:
                del info.channels[cid]
            if gone:
                self._removed(info)
        for group, channels in list(self.producers.items()):
            for cid in [cid for cid, ch in channels.items() if matches(ch)]:
                del channels[cid]
            if not channels:
                del self.producers[group]

    def on_close(self, conn: Connection) -> None:
        self.drop(lambda ch: ch.connection is conn)

    def expire(self, now: float) -> None:
        self.drop(lambda ch: now - ch.last_update > CLIENT_EXPIRED_SECONDS)

    def subscription(self, group: str, topic: str) -> jb.SubscriptionData | None:
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info else None


def tag_codes(sub_string: str | None) -> set[int] | None:
    """``FilterAPI.buildSubscriptionData``: the tags codes of ``A || B``; None for every tag (``*``)."""
    text = (sub_string or "").strip()
    if not text or text == "*":
        return None
    tags = [t.strip() for t in text.split("||") if t.strip()]
    if not tags or "*" in tags:
        return None
    return {tags_code(t) for t in tags}


class LockManager:
    """``RebalanceLockManager``: which client holds each message queue of a group (orderly consumers)."""

    def __init__(self) -> None:
        self.table: dict[str, dict[jb.MessageQueue, tuple[str, float]]] = {}

    def lock(self, group: str, mqs: list[jb.MessageQueue], client_id: str) -> list[jb.MessageQueue]:
        now = time.monotonic()
        held = self.table.setdefault(group, {})
        locked = []
        for mq in mqs:
            owner = held.get(mq)
            if owner is None or owner[0] == client_id or now - owner[1] > LOCK_LEASE_SECONDS:
                held[mq] = (client_id, now)
                locked.append(mq)
        return locked

    def live(self) -> list[tuple[str, jb.MessageQueue, str, float]]:
        """``(group, queue, client, seconds since taken or renewed)`` of every lock not expired."""
        now = time.monotonic()
        return [
            (group, mq, client, now - at)
            for group, held in self.table.items()
            for mq, (client, at) in held.items()
            if now - at <= LOCK_LEASE_SECONDS
        ]

    def adopt(self, group: str, mq: jb.MessageQueue, client_id: str, age: float) -> bool:
        """Take a lock another broker of the group granted (pre-online), unless a live one is held
        here; it expires as if taken here ``age`` seconds ago."""
        now = time.monotonic()
        held = self.table.setdefault(group, {})
        owner = held.get(mq)
        if owner is not None and now - owner[1] <= LOCK_LEASE_SECONDS:
            return False
        held[mq] = (client_id, now - age)
        return True

    def unlock(self, group: str, mqs: list[jb.MessageQueue], client_id: str) -> None:
        held = self.table.get(group, {})
        for mq in mqs:
            owner = held.get(mq)
            if owner is not None and owner[0] == client_id:
                del held[mq]
