"""``broker.conf``: the broker's settings (``BrokerConfig``, ``MessageStoreConfig``, ``NettyServerConfig``).

Only the keys the embedded broker uses are read; defaults are RocketMQ 4.9.x's. The store's own
keys (mapped file sizes, ``messageIndexEnable``...) are read by ``rmqcli.store.settings``, the HA
keys (``haListenPort``, ``haMasterAddress``, ``slaveTimeout``...) by ``rmqcli.broker.ha.config``,
the SlaveActingMaster keys by ``rmqcli.broker.acting.config``, the clean-up keys (``fileReservedTime``,
``deleteWhen``, ``diskMaxUsedSpaceRatio``...) by ``rmqcli.store.retention``.

Roles as ``BrokerStartup``: ``brokerRole`` is ASYNC_MASTER (the default), SYNC_MASTER or SLAVE; a
master's ``brokerId`` is 0 whatever the file says, a slave's must be above 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from formats.commitlog import parse_delay_levels
from formats.javatext import parse_boolean
from rmqcli.broker.acting.config import ActingConfig, acting_config_from_properties
from rmqcli.broker.ha.config import ROLES, SLAVE, HAConfig, ha_config_from_properties
from rmqcli.broker.names import validate_topic
from rmqcli.broker.pop.config import pop_config
from rmqcli.broker.timer.config import timer_config
from rmqcli.errors import UsageError
from rmqcli.store.retention import RetentionConfig, retention_from_properties
from rmqcli.store.settings import StoreSettings, read_properties, settings_from_properties

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"


@dataclass(frozen=True)
class BrokerConfig:
    broker_name: str = "broker-a"
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    listen_port: int = 10911
    broker_ip1: str = ""  # empty: the listen address (127.0.0.1 when listening on every address)
    broker_ip2: str = ""  # the HA address's host (``brokerIP2``); empty: ``broker_ip1``
    broker_role: str = "ASYNC_MASTER"  # MessageStoreConfig.brokerRole
    slave_read_enable: bool = False  # a master may suggest a slave to consumers that fall behind
    offset_check_in_slave: bool = False  # a slave answers PULL_OFFSET_MOVED too (MessageStoreConfig)
    use_server_side_reset_offset: bool = False  # 5.1.1: an offset reset is kept by the broker (offsets)
    namesrv_addr: str = ""
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500  # ms, ASYNC_FLUSH
    sync_flush_timeout: int = 5000  # ms, SYNC_FLUSH
    flush_consumer_offset_interval: int = 5000  # ms
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    broker_permission: int = 6
    long_polling_enable: bool = True
    enable_property_filter: bool = False  # SQL92 subscriptions (rmqcli.filter.sql92)
    short_polling_time_mills: int = 1000
    register_name_server_period: int = 30000  # ms, clamped to [10 s, 60 s]
    region_id: str = "DefaultRegion"  # MSG_REGION of every send answer
    trace_on: bool = True  # TRACE_ON of every send answer: a traced producer skips its Pub when false
    trace_topic_enable: bool = False  # create ``msg_trace_topic_name`` at start (TopicConfigManager)
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"  # counted as a system topic when created
    max_message_size: int = 4 * 1024 * 1024
    reject_transaction_message: bool = False
    transaction_timeout: int = 6000  # ms: a half message younger than this is not checked
    transaction_check_max: int = 15  # checks before a half message is discarded
    transaction_check_interval: int = 60000  # ms between transaction checks
    flush_delay_offset_interval: int = 10000  # ms, delayOffset.json
    acl_enable: bool = False  # plain ACL (rmqcli.broker.acl)
    max_transfer_count_in_memory: int = 32  # messages per pull at most
    max_transfer_bytes_in_memory: int = 256 * 1024  # bytes per pull (past its first message)
    default_query_max_num: int = 32  # messages a unique-key query asks for
    acl_file: str = (
        ""  # not a broker.conf key: `rmq serve --acl FILE`; else $ROCKETMQ_HOME/conf/plain_acl.yml
    )
    store: StoreSettings = field(default_factory=StoreSettings)
    ha: HAConfig = field(default_factory=HAConfig)
    acting: ActingConfig = field(default_factory=ActingConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    given: tuple[
        tuple[str, str], ...
    ] = ()  # broker.conf as read: GET_BROKER_CONFIG shows the keys rmq ignores

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    @property
    def is_slave(self) -> bool:
        return self.broker_role == SLAVE

    @property
    def ha_server_addr(self) -> str:
        """``BrokerController.getHAServerAddr``: ``brokerIP2:haListenPort``."""
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha.ha_listen_port}"


PROPERTY_NAMES = {  # broker.conf key -> BrokerConfig field
    "brokerName": "broker_name",
    "brokerClusterName": "broker_cluster_name",
    "brokerId": "broker_id",
    "listenPort": "listen_port",
    "brokerIP1": "broker_ip1",
    "brokerIP2": "broker_ip2",
    "brokerRole": "broker_role",
    "slaveReadEnable": "slave_read_enable",
    "offsetCheckInSlave": "offset_check_in_slave",
    "useServerSideResetOffset": "use_server_side_reset_offset",
    "namesrvAddr": "namesrv_addr",
    "flushDiskType": "flush_disk_type",
    "flushIntervalCommitLog": "flush_interval_commit_log",
    "syncFlushTimeout": "sync_flush_timeout",
    "flushConsumerOffsetInterval": "flush_consumer_offset_interval",
    "autoCreateTopicEnable": "auto_create_topic_enable",
    "autoCreateSubscriptionGroup": "auto_create_subscription_group",
    "defaultTopicQueueNums": "default_topic_queue_nums",
    "clusterTopicEnable": "cluster_topic_enable",
    "brokerTopicEnable": "broker_topic_enable",
    "brokerPermission": "broker_permission",
    "longPollingEnable": "long_polling_enable",
    "enablePropertyFilter": "enable_property_filter",
    "shortPollingTimeMills": "short_polling_time_mills",
    "registerNameServerPeriod": "register_name_server_period",
    "regionId": "region_id",
    "traceOn": "trace_on",
    "traceTopicEnable": "trace_topic_enable",
    "msgTraceTopicName": "msg_trace_topic_name",
    "maxMessageSize": "max_message_size",
    "rejectTransactionMessage": "reject_transaction_message",
    "transactionTimeOut": "transaction_timeout",
    "transactionCheckMax": "transaction_check_max",
    "transactionCheckInterval": "transaction_check_interval",
    "flushDelayOffsetInterval": "flush_delay_offset_interval",
    "aclEnable": "acl_enable",
    "maxTransferCountOnMessageInMemory": "max_transfer_count_in_memory",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_in_memory",
    "defaultQueryMaxNum": "default_query_max_num",
}


def broker_config_from_properties(props: dict[str, str]) -> BrokerConfig:
    """``BrokerConfig`` from ``broker.conf``; unknown keys ignored (``MixAll.properties2Object``)."""
    kinds = {f.name: f.type for f in fields(BrokerConfig)}
    changes: dict[str, object] = {}
    for key, name in PROPERTY_NAMES.items():
        if key not in props:
            continue
        raw = props[key].strip()
        try:
            if kinds[name] == "int":
                changes[name] = int(raw)
            elif kinds[name] == "bool":
                changes[name] = parse_boolean(raw)
            else:
                changes[name] = raw
        except ValueError as exc:
            raise UsageError(f"broker.conf: {key}={raw!r} is not valid") from exc
    config = replace(
        BrokerConfig(),
        **changes,
        store=settings_from_properties(props),
        ha=ha_config_from_properties(props),
        acting=acting_config_from_properties(props),
        retention=retention_from_properties(props),
        given=tuple(props.items()),
    )
    if config.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
        raise UsageError(f"broker.conf: flushDiskType must be {ASYNC_FLUSH} or {SYNC_FLUSH}")
    config = with_role(config)
    if config.trace_topic_enable:  # the topic names a directory of the store: a valid name only
        problem = validate_topic(config.msg_trace_topic_name)
        if problem:
            raise UsageError(f"broker.conf: msgTraceTopicName={config.msg_trace_topic_name!r}: {problem}")
    try:  # ScheduleMessageService.parseDelayLevel: a broker with a bad list does not start
        levels = parse_delay_levels(config.store.message_delay_level)
    except (ValueError, KeyError, IndexError):
        levels = []
    if not levels:
        bad = config.store.message_delay_level
        raise UsageError(f"broker.conf: messageDelayLevel={bad!r} is not a list like '1s 5s 1m 2h 1d'")
    pop_config(props)  # keys read as given by their services: refused here, at start, when bad
    timer_config(props)
    return config


def with_role(config: BrokerConfig) -> BrokerConfig:
    """``BrokerStartup``'s role checks: a known role; a master's id is 0; a slave's must be above 0."""
    if config.broker_role not in ROLES:
        raise UsageError(
            f"broker.conf: brokerRole must be one of {', '.join(ROLES)}, not {config.broker_role!r}"
        )
    if config.is_slave:
        if config.broker_id <= 0:
            raise UsageError("broker.conf: Slave's brokerId must be > 0")
        return config
    return replace(config, broker_id=0)


def with_listen_port(config: BrokerConfig, port: int, props: dict[str, str]) -> BrokerConfig:
    """``listenPort`` from the command line; the HA port follows it (``listenPort + 1``) unless
    broker.conf names ``haListenPort``."""
    ha = config.ha if "haListenPort" in props else replace(config.ha, ha_listen_port=port + 1)
    return replace(config, listen_port=port, ha=ha)


def load_broker_config(path: Path | None) -> BrokerConfig:
    if path is None:
        return BrokerConfig()
    return broker_config_from_properties(read_properties(path))
