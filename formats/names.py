"""RocketMQ's shared vocabulary: topic permissions, the retry and dead-letter prefixes, the system
topics, the name server's order-config namespace and the groups the tools use.

Declarations only, written once here and imported by the admin tools, the embedded broker and the
store writer. Specified by Apache RocketMQ 4.9.x ``PermName``, ``MixAll``, ``TopicValidator`` and
``NamesrvUtil`` (protocol.md B.4, C.5; formats.md §5.3 for ``topics.json``).
"""

from __future__ import annotations

# --- topic permissions (PermName) --------------------------------------------------------------
PERM_INHERIT = 1  # PermName.PERM_INHERIT: a topic created from this one in a send inherits it
PERM_WRITE = 2
PERM_READ = 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE  # 6: a topic's default

# --- a consumer group's own topics (MixAll) ----------------------------------------------------
RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX

# --- system topics (TopicValidator) ------------------------------------------------------------
DEFAULT_TOPIC = "TBW102"  # AUTO_CREATE_TOPIC_KEY_TOPIC: the layout an auto-created topic borrows
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # RMQ_SYS_SCHEDULE_TOPIC: delayed messages wait here
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX (lower case, as in Java)
RMQ_SYS_PREFIX = "RMQ_SYS_"  # how the transaction and trace topics above are named
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"  # MixAll.REPLY_TOPIC_POSTFIX: ``<cluster>_REPLY_TOPIC``
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x TimerMessageStore.TIMER_TOPIC: a consume queue, no topic config

# TopicValidator.SYSTEM_TOPIC_SET (a broker adds its cluster and broker names at start)
SYSTEM_TOPICS = (
    DEFAULT_TOPIC,
    SCHEDULE_TOPIC,
    BENCHMARK_TOPIC,
    TRANS_HALF_TOPIC,
    TRACE_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
)
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

# --- name server KV namespaces (NamesrvUtil) ---------------------------------------------------
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NAMESPACE_ORDER_TOPIC_CONFIG: ``broker:queues;…``

# --- groups (MixAll) ---------------------------------------------------------------------------
TOOLS_CONSUMER = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP: mqadmin's pull consumer
CLIENT_INNER_PRODUCER = "CLIENT_INNER_PRODUCER"  # MixAll.CLIENT_INNER_PRODUCER_GROUP
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the half queue's offsets
# MixAll.CID_RMQ_SYS_PREFIX: a group starting with it is a system one (MixAll.isSysConsumerGroup,
# case-sensitive; 5.1.1's BrokerMetricsManager.isSystemGroup compares it lower-cased)
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
