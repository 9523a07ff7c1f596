"""``broker.conf``: the broker's settings (``BrokerConfig``, ``MessageStoreConfig``, ``NettyServerConfig``).

The keys, their types and RocketMQ 4.9.x's defaults are rows of ``rmqcli.conf.keys``; this module
is the broker's typed view of them, with the parts' own views: the store's keys (mapped file
sizes, ``messageIndexEnable``...) in ``rmqcli.store.settings``, the HA keys (``haListenPort``,
``haMasterAddress``, ``slaveTimeout``...) in ``rmqcli.broker.ha.config``, the SlaveActingMaster
keys in ``rmqcli.broker.acting.config``, the clean-up keys (``fileReservedTime``, ``deleteWhen``,
``diskMaxUsedSpaceRatio``...) in ``rmqcli.store.retention``, POP's in ``rmqcli.broker.pop.config``,
the timer's in ``rmqcli.broker.timer.config``, the metrics' in ``rmqcli.broker.metrics.config``.

Roles as ``BrokerStartup``: ``brokerRole`` is ASYNC_MASTER (the default), SYNC_MASTER or SLAVE; a
master's ``brokerId`` is 0 whatever the file says, a slave's must be above 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rmqcli.broker.acting.config import ActingConfig
from rmqcli.broker.autoswitch.config import AutoSwitchConfig
from rmqcli.broker.dledger.config import DLedgerConfig, checked
from rmqcli.broker.ha.config import SLAVE, HAConfig, ha_config_from_properties
from rmqcli.broker.metrics.config import MetricsConfig
from rmqcli.broker.names import validate_topic
from rmqcli.broker.pop.config import PopConfig, pop_config
from rmqcli.broker.timer.config import TimerConfig
from rmqcli.conf.keys import FLUSH_TYPES, setting
from rmqcli.conf.parse import conf_of, refused
from rmqcli.store.retention import RetentionConfig, retention_from_properties
from rmqcli.store.settings import StoreSettings, settings_from_properties

ASYNC_FLUSH, SYNC_FLUSH = FLUSH_TYPES


@dataclass(frozen=True)
class BrokerConfig:
    broker_name: str = setting("brokerName")
    broker_cluster_name: str = setting("brokerClusterName")
    broker_id: int = setting("brokerId")
    listen_port: int = setting("listenPort")
    # empty: the listen address (127.0.0.1 when listening on every address)
    broker_ip1: str = setting("brokerIP1")
    broker_ip2: str = setting("brokerIP2")  # the HA address's host (``brokerIP2``); empty: ``broker_ip1``
    broker_role: str = setting("brokerRole")  # MessageStoreConfig.brokerRole
    # a master may suggest a slave to consumers that fall behind
    slave_read_enable: bool = setting("slaveReadEnable")
    # a slave answers PULL_OFFSET_MOVED too (MessageStoreConfig)
    offset_check_in_slave: bool = setting("offsetCheckInSlave")
    # 5.1.1: an offset reset is kept by the broker (offsets)
    use_server_side_reset_offset: bool = setting("useServerSideResetOffset")
    namesrv_addr: str = setting("namesrvAddr")
    flush_disk_type: str = setting("flushDiskType")
    flush_interval_commit_log: int = setting("flushIntervalCommitLog")  # ms, ASYNC_FLUSH
    sync_flush_timeout: int = setting("syncFlushTimeout")  # ms, SYNC_FLUSH
    flush_consumer_offset_interval: int = setting("flushConsumerOffsetInterval")  # ms
    auto_create_topic_enable: bool = setting("autoCreateTopicEnable")
    auto_create_subscription_group: bool = setting("autoCreateSubscriptionGroup")
    default_topic_queue_nums: int = setting("defaultTopicQueueNums")
    cluster_topic_enable: bool = setting("clusterTopicEnable")
    broker_topic_enable: bool = setting("brokerTopicEnable")
    broker_permission: int = setting("brokerPermission")
    long_polling_enable: bool = setting("longPollingEnable")
    # SQL92 subscriptions (rmqcli.filter.sql92)
    enable_property_filter: bool = setting("enablePropertyFilter")
    short_polling_time_mills: int = setting("shortPollingTimeMills")
    register_name_server_period: int = setting("registerNameServerPeriod")  # ms, clamped to [10 s, 60 s]
    region_id: str = setting("regionId")  # MSG_REGION of every send answer
    # TRACE_ON of every send answer: a traced producer skips its Pub when false
    trace_on: bool = setting("traceOn")
    # create ``msg_trace_topic_name`` at start (TopicConfigManager)
    trace_topic_enable: bool = setting("traceTopicEnable")
    # counted as a system topic when created
    msg_trace_topic_name: str = setting("msgTraceTopicName")
    max_message_size: int = setting("maxMessageSize")
    reject_transaction_message: bool = setting("rejectTransactionMessage")
    # ms: a half message younger than this is not checked
    transaction_timeout: int = setting("transactionTimeOut")
    transaction_check_max: int = setting("transactionCheckMax")  # checks before a half message is discarded
    transaction_check_interval: int = setting("transactionCheckInterval")  # ms between transaction checks
    flush_delay_offset_interval: int = setting("flushDelayOffsetInterval")  # ms, delayOffset.json
    acl_enable: bool = setting("aclEnable")  # plain ACL (rmqcli.broker.acl)
    # messages per pull at most
    max_transfer_count_in_memory: int = setting("maxTransferCountOnMessageInMemory")
    # bytes per pull (past its first message)
    max_transfer_bytes_in_memory: int = setting("maxTransferBytesOnMessageInMemory")
    default_query_max_num: int = setting("defaultQueryMaxNum")  # messages a unique-key query asks for
    acl_file: str = (
        ""  # not a broker.conf key: `rmq serve --acl FILE`; else $ROCKETMQ_HOME/conf/plain_acl.yml
    )
    store: StoreSettings = field(default_factory=StoreSettings)
    ha: HAConfig = field(default_factory=HAConfig)
    acting: ActingConfig = field(default_factory=ActingConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    pop: PopConfig = field(default_factory=PopConfig)
    timer: TimerConfig = field(default_factory=TimerConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    dledger: DLedgerConfig = field(default_factory=DLedgerConfig)
    autoswitch: AutoSwitchConfig = field(default_factory=AutoSwitchConfig)
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


def broker_config_from_properties(props: Mapping[str, str]) -> BrokerConfig:
    """``BrokerConfig`` from ``broker.conf`` (a ``BrokerConf``, or the file as a mapping): each
    part's view; keys rmq does not implement are kept as given (``MixAll.properties2Object``
    ignores them)."""
    conf = conf_of(props)
    config = BrokerConfig(
        **conf.values(BrokerConfig),
        store=settings_from_properties(conf),
        ha=ha_config_from_properties(conf),
        acting=conf.view(ActingConfig),
        retention=retention_from_properties(conf),
        pop=pop_config(conf),
        timer=conf.view(TimerConfig),
        metrics=conf.view(MetricsConfig),
        dledger=checked(conf.view(DLedgerConfig)),
        autoswitch=conf.view(AutoSwitchConfig),
        given=tuple(conf.items()),
    )
    config = with_role(config)
    if config.trace_topic_enable:  # the topic names a directory of the store: a valid name only
        problem = validate_topic(config.msg_trace_topic_name)
        if problem:
            raise refused(f"msgTraceTopicName={config.msg_trace_topic_name!r}: {problem}")
    return config


def with_role(config: BrokerConfig) -> BrokerConfig:
    """``BrokerStartup``'s role checks: a master's id is 0; a slave's must be above 0 (the table
    takes only the three roles). A member of a DLedger group starts as a slave with its follower id
    (the election decides: ``rmqcli.broker.dledger``)."""
    if config.dledger.enable and config.autoswitch.enable:
        raise refused("enableControllerMode and enableDLegerCommitLog cannot both be true")
    if config.dledger.enable:
        return replace(config, broker_role=SLAVE, broker_id=config.dledger.follower_id)
    if config.autoswitch.enable:  # the controller decides (5.1.1 starts every one fenced, as a slave)
        return replace(config, broker_role=SLAVE)
    if config.is_slave:
        if config.broker_id <= 0:
            raise refused("Slave's brokerId must be > 0")
        return config
    return replace(config, broker_id=0)


def with_listen_port(config: BrokerConfig, port: int, props: Mapping[str, str]) -> BrokerConfig:
    """``listenPort`` from the command line; the HA port follows it (``listenPort + 1``) unless
    broker.conf names ``haListenPort``."""
    ha = config.ha if "haListenPort" in props else replace(config.ha, ha_listen_port=port + 1)
    return replace(config, listen_port=port, ha=ha)
