"""Request and response codes (protocol.md B.1-B.5), named as in RocketMQ's ``RequestCode.java``
and ``ResponseCode.java`` / ``RemotingSysResponseCode.java`` (4.9.7; 5.x additions marked), and the
``MQVersion.Version`` names behind the ``version`` field of every command (A.8).
"""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """``RequestCode.java``; codes above 32767 only fit JSON headers (A.4)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    UPDATE_AND_CREATE_TOPIC_LIST = 18  # 5.x
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    GET_TIMER_CHECK_POINT = 60  # 5.x
    GET_TIMER_METRICS = 61  # 5.x
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217  # 5.x
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    GET_TOPIC_CONFIG = 351  # 5.x
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # 5.x
    LITE_PULL_MESSAGE = 361  # 5.x: the pull of a lite pull consumer in POP mode
    QUERY_ASSIGNMENT = 400  # 5.x: the broker allocates queues (rmqcli.broker.pop.assignment)
    SET_MESSAGE_REQUEST_MODE = 401  # 5.x: PULL or POP per topic and group
    GET_BROKER_MEMBER_GROUP = 901  # 5.x (SlaveActingMaster)
    BROKER_HEARTBEAT = 904  # 5.x (SlaveActingMaster's lightweight heartbeat)
    NOTIFY_MIN_BROKER_ID_CHANGE = 905  # 5.x
    EXCHANGE_BROKER_HA_INFO = 906  # 5.x
    GET_BROKER_HA_STATUS = 907  # 5.x (HARuntimeInfo); rmq brokers answer it too
    # 5.x controller mode (controller.md §2.1)
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007  # a broker's epoch entries (controller.md §2.11)
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    POP_MESSAGE = 200050  # 5.x POP consumption (rmqcli.broker.pop)
    ACK_MESSAGE = 200051  # 5.x
    PEEK_MESSAGE = 200052  # 5.x
    CHANGE_MESSAGE_INVISIBLETIME = 200053  # 5.x
    NOTIFICATION = 200054  # 5.x
    POLLING_INFO = 200055  # 5.x
    # rmq's own, no RocketMQ code: a returning master takes its acting slave's queue locks
    # (SlaveActingMaster pre-online); a Java broker answers REQUEST_CODE_NOT_SUPPORTED
    RMQ_GET_QUEUE_LOCKS = 31001  # fits the ROCKETMQ header's int16 code; no RocketMQ code uses 3xxxx


class ResponseCode(enum.IntEnum):
    """``ResponseCode.java`` + ``RemotingSysResponseCode.java`` (B.1).

    209-211 mean different things in 4.9.7 (ACL failures, the primary names here) and 5.x
    (``POLLING_FULL``, ``POLLING_TIMEOUT``, ``BROKER_NOT_EXIST``, kept as aliases).
    """

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # 5.x
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    POLLING_FULL = 209  # 5.x meaning
    POLLING_TIMEOUT = 210  # 5.x meaning
    BROKER_NOT_EXIST = 211  # 5.x meaning
    BROKER_DISPATCH_NOT_COMPLETE = 212  # 5.x
    BROADCAST_CONSUMPTION = 213  # 5.x
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501  # 5.x
    ILLEGAL_OPERATION = 604  # 5.x
    GO_AWAY = 1500  # 5.x


def code_name(code: int, *, response: bool) -> str:
    """The RocketMQ name of ``code`` (``"CODE_<n>"`` when unknown), for messages and dumps."""
    enum_type = ResponseCode if response else RequestCode
    try:
        return enum_type(code).name
    except ValueError:
        return f"CODE_{code}"


# --- MQVersion (A.8) ---------------------------------------------------------------------------
def _version_names() -> list[str]:
    """``MQVersion.Version`` by ordinal: 3.0.0 pre-releases, then SNAPSHOT/release pairs."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"] + [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    patches = {(3, 0): range(1, 16), (3, 1): range(10), (3, 2): range(10)}
    patches.update({(3, minor): range(1, 10) for minor in range(3, 10)})
    patches.update({(major, minor): range(10) for major in (4, 5) for minor in range(10)})
    for (major, minor), rng in patches.items():
        for p in rng:
            names += [f"V{major}_{minor}_{p}_SNAPSHOT", f"V{major}_{minor}_{p}"]
    names.append("HIGHER_VERSION")
    return names


_VERSIONS: list[str] = []


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: 407 -> ``V4_9_7``; past the end -> ``HIGHER_VERSION``."""
    if not _VERSIONS:
        _VERSIONS.extend(_version_names())
    return _VERSIONS[min(max(ordinal, 0), len(_VERSIONS) - 1)]
