"""The broker.conf keys: one ``Key`` a row in ``TABLE`` (see the package's design note).

Types are the Java field's (``BOOL``, ``INT``, ``LONG``, ``STR``; ``ENUM`` for the two enums
``MessageStoreConfig`` takes by name). Defaults are RocketMQ 4.9.8's (``BrokerConfig``,
``MessageStoreConfig``, ``NettyServerConfig``, ``NettyClientConfig``), 5.1.1's for the 5.x keys
(``origin``), rmq's own for its own keys; ``differs`` says where rmq's default is not the Java
broker's. A typed view names the key each of its attributes comes from with ``setting``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from formats.commitlog import DEFAULT_DELAY_LEVELS
from formats.consumequeue import DEFAULT_CQ_FILE_SIZE
from formats.indexfile import DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM

BOOL, INT, LONG, STR, ENUM = "boolean", "int", "long", "String", "enum"
V4, V5, RMQ = "4.9.8", "5.1.1", "rmq"  # where a key and its default come from
# the parts of rmq that read keys (``Key.owner``)
BROKER, STORE, HA, ACTING, RETENTION = "broker", "store", "ha", "acting", "retention"
POP, TIMER, NAMESRV, SERVE, ACL = "pop", "timer", "namesrv", "serve", "acl"
DLEDGER, METRICS, CONTROLLER, AUTOSWITCH = "dledger", "metrics", "controller", "autoswitch"
TRUE_FALSE = ("true", "false")  # the choices of a boolean rmq refuses other text for
CPUS = os.cpu_count() or 1  # Runtime.availableProcessors(), in the thread-count defaults
MIB = 1024 * 1024


@dataclass(frozen=True)
class Key:
    """One broker.conf key.

    ``owner``: the part of rmq that reads it, empty when rmq does not implement it (it is then
    named at start and shown as given). ``low``/``high``: the range rmq takes (a Java broker takes
    any number). ``choices``: an enum's names; for a boolean, ``TRUE_FALSE`` refuses any other text
    (Java reads it as false). ``only``: rmq implements the key with this value only; another is
    named at start as not implemented. ``at_start``: read at start only (UPDATE_BROKER_CONFIG
    refuses it). ``shown``: GET_BROKER_CONFIG reports it whatever the file says (the value in
    force; the default for a key rmq does not implement, as a 4.9.8 broker always reports it).
    """

    name: str
    kind: str
    default: Any
    owner: str = ""
    origin: str = V4
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    only: Any = None
    at_start: bool = False
    shown: bool = False
    differs: str = ""  # how rmq's default differs from the Java broker's

    @property
    def implemented(self) -> bool:
        return bool(self.owner)


def _broker(name: str, kind: str, default: Any, **more: Any) -> Key:
    return Key(name, kind, default, BROKER, shown=True, **more)


def _store(name: str, kind: str, default: Any, **more: Any) -> Key:
    return Key(name, kind, default, STORE, shown=True, at_start=True, **more)


def _ha(name: str, kind: str, default: Any, **more: Any) -> Key:
    return Key(name, kind, default, HA, shown=True, at_start=True, **more)


def _acting(name: str, kind: str, default: Any, **more: Any) -> Key:
    positive = {"low": 1} if kind in (INT, LONG) else {"choices": TRUE_FALSE}
    return Key(name, kind, default, ACTING, V5, shown=True, at_start=True, **positive, **more)


def _autoswitch(name: str, kind: str, default: Any, **more: Any) -> Key:
    return Key(name, kind, default, AUTOSWITCH, V5, shown=True, at_start=True, **more)


def _retention(name: str, kind: str, default: Any, **more: Any) -> Key:
    return Key(name, kind, default, RETENTION, shown=True, **more)


ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")  # MessageStoreConfig.brokerRole (BrokerRole)
FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")  # MessageStoreConfig.flushDiskType (FlushDiskType)

_IMPLEMENTED: tuple[Key, ...] = (  # the keys rmq implements
    # --- BrokerConfig and the broker's share of MessageStoreConfig / NettyServerConfig --------------
    # (GET_BROKER_CONFIG reports the keys rmq implements in this order, broker, store, HA, acting,
    # retention, after the file's own keys)
    _broker("brokerName", STR, "broker-a", at_start=True, differs="4.9.8: the host's name"),
    _broker("brokerClusterName", STR, "DefaultCluster", at_start=True),
    _broker("brokerId", LONG, 0, at_start=True),
    _broker("listenPort", INT, 10911, at_start=True),  # BrokerStartup's, before the file is read
    _broker("brokerIP1", STR, "", at_start=True, differs="4.9.8: the host's address; rmq: --listen's"),
    _broker("brokerIP2", STR, "", at_start=True, differs="4.9.8: the host's address; rmq: brokerIP1"),
    _broker("brokerRole", ENUM, "ASYNC_MASTER", choices=ROLES, at_start=True),
    _broker("slaveReadEnable", BOOL, False),
    _broker("offsetCheckInSlave", BOOL, False),
    _broker("useServerSideResetOffset", BOOL, False, origin=V5),
    _broker("namesrvAddr", STR, "", at_start=True, differs="4.9.8: $NAMESRV_ADDR"),
    _broker("flushDiskType", ENUM, "ASYNC_FLUSH", choices=FLUSH_TYPES, at_start=True),
    _broker("flushIntervalCommitLog", INT, 500, at_start=True),
    _broker("syncFlushTimeout", INT, 5000),
    _broker("flushConsumerOffsetInterval", INT, 5000),
    _broker("autoCreateTopicEnable", BOOL, True),
    _broker("autoCreateSubscriptionGroup", BOOL, True, at_start=True),
    _broker("defaultTopicQueueNums", INT, 8),
    _broker("clusterTopicEnable", BOOL, True),
    _broker("brokerTopicEnable", BOOL, True),
    _broker("brokerPermission", INT, 6),
    _broker("longPollingEnable", BOOL, True),
    _broker("enablePropertyFilter", BOOL, False),
    _broker("shortPollingTimeMills", LONG, 1000),
    _broker("registerNameServerPeriod", INT, 30000),
    _broker("regionId", STR, "DefaultRegion"),
    _broker("traceOn", BOOL, True),
    _broker("traceTopicEnable", BOOL, False, at_start=True),  # the trace topic is created at start
    _broker("msgTraceTopicName", STR, "RMQ_SYS_TRACE_TOPIC", at_start=True),
    _broker("maxMessageSize", INT, 4 * MIB),
    _broker("rejectTransactionMessage", BOOL, False),
    _broker("transactionTimeOut", LONG, 6000),
    _broker("transactionCheckMax", INT, 15),
    _broker("transactionCheckInterval", LONG, 60000),
    _broker("flushDelayOffsetInterval", LONG, 10000),
    _broker("aclEnable", BOOL, False, at_start=True),
    _broker("maxTransferCountOnMessageInMemory", INT, 32),
    _broker("maxTransferBytesOnMessageInMemory", INT, 256 * 1024),
    _broker("defaultQueryMaxNum", INT, 32),
    # --- the store (MessageStoreConfig) ---------------------------------------------------------------
    _store("mappedFileSizeCommitLog", INT, 1024 * MIB),
    _store("mappedFileSizeConsumeQueue", INT, DEFAULT_CQ_FILE_SIZE),
    _store("maxHashSlotNum", INT, DEFAULT_HASH_SLOT_NUM),
    _store("maxIndexNum", INT, DEFAULT_INDEX_NUM),
    _store("messageDelayLevel", STR, DEFAULT_DELAY_LEVELS),
    _store("messageIndexEnable", BOOL, True),
    _store("messageIndexSafe", BOOL, False),
    _store("checkCRCOnRecover", BOOL, True),
    _store("storePathCommitLog", STR, "", differs="4.9.8: unset (<storePathRootDir>/commitlog)"),
    # --- HA (MessageStoreConfig; rmqHaAllowedAddresses is rmq's own) ---------------------------------
    _ha("haSendHeartbeatInterval", INT, 5000, low=1),
    _ha("haHousekeepingInterval", INT, 20000, low=1),
    _ha("haTransferBatchSize", INT, 32 * 1024, low=1),
    _ha("haSlaveFallbehindMax", INT, 256 * MIB, low=1),
    _ha("slaveTimeout", INT, 3000, low=1),
    _ha("haMasterAddress", STR, None),
    _ha("haListenPort", INT, 10912, low=1),  # BrokerStartup: listenPort + 1
    _ha("rmqHaAllowedAddresses", STR, "", origin=RMQ),
    # --- SlaveActingMaster (5.1.1 BrokerConfig, MessageStoreConfig) ---------------------------------
    _acting("enableSlaveActingMaster", BOOL, False),
    _acting("enableRemoteEscape", BOOL, False),
    _acting("brokerHeartbeatInterval", INT, 1000),
    _acting("brokerNotActiveTimeoutMillis", LONG, 10000),
    _acting("syncBrokerMemberGroupPeriod", INT, 1000),
    _acting("totalReplicas", INT, 1),
    _acting("inSyncReplicas", INT, 1),
    _acting("minInSyncReplicas", INT, 1),
    _acting("enableAutoInSyncReplicas", BOOL, False),
    _acting("haMaxGapNotInSync", INT, 256 * MIB),
    _acting("lockInStrictMode", BOOL, False),
    # --- controller mode (5.1.1 BrokerConfig, MessageStoreConfig; rmqcli.broker.autoswitch) ------------
    _autoswitch("enableControllerMode", BOOL, False, choices=TRUE_FALSE),
    _autoswitch("controllerAddr", STR, ""),
    _autoswitch("fetchControllerAddrByDnsLookup", BOOL, False, only=False),
    _autoswitch("syncBrokerMetadataPeriod", LONG, 5000, low=1),
    _autoswitch("checkSyncStateSetPeriod", LONG, 5000, low=1),
    _autoswitch("syncControllerMetadataPeriod", LONG, 10000, low=1),
    _autoswitch("controllerHeartBeatTimeoutMills", LONG, 10000, low=1),
    _autoswitch("brokerElectionPriority", INT, (1 << 31) - 1),
    _autoswitch("sendHeartbeatTimeoutMillis", INT, 1000, low=1),
    _autoswitch("allAckInSyncStateSet", BOOL, False, choices=TRUE_FALSE),
    _autoswitch("haMaxTimeSlaveNotCatchup", LONG, 15000, low=1),
    _autoswitch("syncFromLastFile", BOOL, False, choices=TRUE_FALSE),
    _autoswitch("asyncLearner", BOOL, False, choices=TRUE_FALSE),
    _autoswitch("storePathEpochFile", STR, None),  # None: <storePathRootDir>/epochFileCheckpoint
    _autoswitch("storePathBrokerIdentity", STR, None),  # None: <storePathRootDir>/brokerIdentity
    # --- clean-up (MessageStoreConfig; the last three are 5.x's) ------------------------------------
    _retention("fileReservedTime", INT, 72),
    _retention("deleteWhen", STR, "04"),
    _retention("diskMaxUsedSpaceRatio", INT, 75),
    _retention("cleanResourceInterval", INT, 10000, low=1),
    _retention("deleteCommitLogFilesInterval", INT, 100),
    _retention("deleteConsumeQueueFilesInterval", INT, 100),
    _retention("destroyMapedFileIntervalForcibly", INT, 120000),
    _retention("redeleteHangedFileInterval", INT, 120000),
    _retention("cleanFileForciblyEnable", BOOL, True, choices=TRUE_FALSE),
    _retention("diskSpaceWarningLevelRatio", INT, 90, origin=V5),
    _retention("diskSpaceCleanForciblyRatio", INT, 85, origin=V5),
    _retention("deleteFileBatchMax", INT, 10, origin=V5, low=1),
    # --- a DLedger group (MessageStoreConfig; rmqcli.broker.dledger) ----------------------------------
    Key("enableDLegerCommitLog", BOOL, False, DLEDGER, at_start=True, choices=TRUE_FALSE, shown=True),
    Key("dLegerGroup", STR, None, DLEDGER, at_start=True, shown=True),
    Key("dLegerPeers", STR, None, DLEDGER, at_start=True, shown=True),
    Key("dLegerSelfId", STR, None, DLEDGER, at_start=True, shown=True),
    Key("preferredLeaderId", STR, None, DLEDGER, at_start=True, shown=True),
    # read as enableBatchPush (the setter's name); 4.9.8 reports the field, isEnableBatchPush (a row
    # below, its default whatever the value)
    Key(
        "enableBatchPush",
        BOOL,
        False,
        DLEDGER,
        at_start=True,
        choices=TRUE_FALSE,
        shown=True,
        differs="4.9.8 reports it as isEnableBatchPush",
    ),  # fmt: skip
    # the broker's metrics (5.1.1 BrokerConfig; rmqcli.broker.metrics): PROM is served, OTLP_GRPC and
    # LOG are named at start as not implemented (metrics stay off); a number is the enum's ordinal
    Key(
        "metricsExporterType",
        ENUM,
        "DISABLE",
        METRICS,
        V5,
        at_start=True,
        shown=True,
        choices=("DISABLE", "OTLP_GRPC", "PROM", "LOG", "0", "1", "2", "3"),
    ),
    Key("metricsPromExporterHost", STR, "", METRICS, V5, at_start=True, shown=True),  # empty: brokerIP1
    Key("metricsPromExporterPort", INT, 5557, METRICS, V5, low=0, high=65535, at_start=True, shown=True),
    Key("metricsLabel", STR, "", METRICS, V5, at_start=True, shown=True),  # k:v,k:v added to every series
    Key(
        "metricsInDelta", BOOL, False, METRICS, V5, at_start=True, shown=True
    ),  # the label aggregation="delta"
    # the store's root: the STORE argument is served (rmq serve warns when this names another)
    Key("storePathRootDir", STR, "", STORE, shown=True, at_start=True, differs="4.9.8: ~/store"),
    # --- read, not reported by GET_BROKER_CONFIG but as given ---------------------------------------
    # rmq speaks to name servers as a 5.1.1 broker with compatibleWithOldNameSrv=false does
    Key("compatibleWithOldNameSrv", BOOL, True, ACTING, V5, only=False),
    Key("reviveQueueNum", INT, 8, POP, V5, low=1, high=64),
    Key("reviveInterval", LONG, 1000, POP, V5, low=100, high=60_000),
    Key("popPollingSize", INT, 1024, POP, V5, low=0, high=1_000_000),
    Key("maxPopPollingSize", LONG, 100000, POP, V5, low=0, high=10_000_000),
    Key("timerMaxDelaySec", INT, 3 * 86400, TIMER, V5, low=1, high=10 * 365 * 86400),
    Key("timerPrecisionMs", INT, 1000, TIMER, V5, low=10, high=3_600_000),
    Key("timerWheelEnable", BOOL, True, TIMER, V5),
    Key("timerRollWindowSlot", INT, 2 * 86400, TIMER, V5),  # out of [2, slots - 60]: the latter (5.1.1)
    Key("timerMaxPending", INT, 100_000, TIMER, RMQ, low=1, high=10_000_000),  # timers held in memory
    # the embedded NameServer's (5.1.1 NamesrvConfig); its pushes (905) are not implemented
    Key("supportActingMaster", BOOL, False, NAMESRV, V5, choices=TRUE_FALSE),
    Key("scanNotActiveBrokerInterval", LONG, 5000, NAMESRV, V5, low=1),
    Key("notifyMinBrokerIdChanged", BOOL, False, NAMESRV, V5, choices=TRUE_FALSE, only=False),
    # the controller's (5.1.1 ControllerConfig, NamesrvConfig.enableControllerInNamesrv): embedded in
    # rmq serve's NameServer or standalone (rmq controller -c FILE), controller.md §4
    Key("enableControllerInNamesrv", BOOL, False, CONTROLLER, V5, choices=TRUE_FALSE),
    Key("controllerDLegerGroup", STR, "", CONTROLLER, V5),
    Key("controllerDLegerPeers", STR, "", CONTROLLER, V5),
    Key("controllerDLegerSelfId", STR, "", CONTROLLER, V5),
    Key("controllerStorePath", STR, "", CONTROLLER, V5),  # "": ~/DledgerController
    Key("configStorePath", STR, "", CONTROLLER, V5),  # "": ~/controller/controller.properties
    Key("mappedFileSize", INT, 1024 * MIB, CONTROLLER, V5, low=4096),
    Key("enableElectUncleanMaster", BOOL, False, CONTROLLER, V5, choices=TRUE_FALSE),
    Key("processReadEvent", BOOL, False, CONTROLLER, V5, choices=TRUE_FALSE),
    Key("notifyBrokerRoleChanged", BOOL, True, CONTROLLER, V5, choices=TRUE_FALSE),
    Key("scanInactiveMasterInterval", LONG, 5000, CONTROLLER, V5, low=1),
    Key("controllerThreadPoolNums", INT, 16, "", V5),  # one asyncio loop answers them all
    Key("controllerRequestThreadPoolQueueCapacity", INT, 50000, "", V5),
    # rmq serve's limits (the flags --max-buffered-bytes and --max-connections come first)
    Key("rmqMaxPendingFrameBytes", LONG, 256 * MIB, SERVE, RMQ, low=1),
    Key("rmqMaxConnections", INT, 10_000, SERVE, RMQ, low=1),
    # the keys the broker signs its own requests with (rmqcli.broker.acl.brokerkeys.SigningKeys)
    Key("rmqBrokerAccessKey", STR, "", ACL, RMQ),
    Key("rmqBrokerSecretKey", STR, "", ACL, RMQ),
)
# 4.9.8's keys rmq does not implement: name, Java type, default as a 4.9.8 broker reports it ("-":
# null or the environment's; "cpus": counted from the processors, ``_BY_PROCESSORS``). GET_BROKER_CONFIG
# always reports those marked "shown", with these defaults, in this order (exportConfigs and
# exportMetrics read the last three). bitMapLengthConsumeQueueExt is 64 in MessageStoreConfig; the
# broker's ConsumerFilterManager sets it from the bloom filter's settings (112 with their defaults).
_NOT_IMPLEMENTED = """
accessMessageInMemoryMaxRatio             int      40       shown
transientStorePoolEnable                  boolean  false    shown
serverWorkerThreads                       int      8        shown
serverChannelMaxIdleTimeSeconds           int      120      shown
filterServerNums                          int      0        shown
useTLS                                    boolean  false    shown
clientCallbackExecutorThreads             int      cpus     shown
# BrokerConfig
rocketmqHome                              String   -
messageStorePlugIn                        String   ""
sendMessageThreadPoolNums                 int      cpus
putMessageFutureThreadPoolNums            int      cpus
pullMessageThreadPoolNums                 int      cpus
processReplyMessageThreadPoolNums         int      cpus
queryMessageThreadPoolNums                int      cpus
adminBrokerThreadPoolNums                 int      16
clientManageThreadPoolNums                int      32
consumerManageThreadPoolNums              int      32
heartbeatThreadPoolNums                   int      cpus
endTransactionThreadPoolNums              int      cpus
flushConsumerOffsetHistoryInterval        int      60000
fetchNamesrvAddrByAddressServer           boolean  false
sendThreadPoolQueueCapacity               int      10000
putThreadPoolQueueCapacity                int      10000
pullThreadPoolQueueCapacity               int      100000
replyThreadPoolQueueCapacity              int      10000
queryThreadPoolQueueCapacity              int      20000
clientManagerThreadPoolQueueCapacity      int      1000000
consumerManagerThreadPoolQueueCapacity    int      1000000
heartbeatThreadPoolQueueCapacity          int      50000
endTransactionPoolQueueCapacity           int      100000
notifyConsumerIdsChangedEnable            boolean  true
highSpeedMode                             boolean  false
commercialEnable                          boolean  true
commercialTimerCount                      int      1
commercialTransCount                      int      1
commercialBigCount                        int      1
commercialBaseCount                       int      1
transferMsgByHeap                         boolean  true
maxDelayTime                              int      40
registerBrokerTimeoutMills                int      6000
disableConsumeIfConsumerReadSlowly        boolean  false
consumerFallbehindThreshold               long     17179869184
brokerFastFailureEnable                   boolean  true
waitTimeMillsInSendQueue                  long     200
waitTimeMillsInPullQueue                  long     5000
waitTimeMillsInHeartbeatQueue             long     31000
waitTimeMillsInTransactionQueue           long     3000
startAcceptSendRequestTimeStamp           long     0
enableCalcFilterBitMap                    boolean  false
expectConsumerNumUseFilter                int      32
maxErrorRateOfBloomFilter                 int      20
filterDataCleanTimeSpan                   long     86400000
filterSupportRetry                        boolean  false
compressedRegister                        boolean  false
forceRegister                             boolean  true
storeReplyMessageEnable                   boolean  true
enableDetailStat                          boolean  true
autoDeleteUnusedStats                     boolean  false
isolateLogEnable                          boolean  false
configBlackList                           String   configBlackList;brokerConfigPath
# MessageStoreConfig
storePathDLedgerCommitLog                 String   -
readOnlyCommitLogStorePaths               String   -
enableConsumeQueueExt                     boolean  false
mappedFileSizeConsumeQueueExt             int      50331648
bitMapLengthConsumeQueueExt               int      112
commitIntervalCommitLog                   int      200
useReentrantLockWhenPutMessage            boolean  true
flushCommitLogTimed                       boolean  true
flushIntervalConsumeQueue                 int      1000
putMsgIndexHightWater                     int      600000
flushCommitLogLeastPages                  int      4
commitCommitLogLeastPages                 int      4
flushLeastPagesWhenWarmMapedFile          int      4096
flushConsumeQueueLeastPages               int      2
flushCommitLogThoroughInterval            int      10000
commitCommitLogThoroughInterval           int      200
flushConsumeQueueThoroughInterval         int      60000
maxTransferBytesOnMessageInDisk           int      65536
maxTransferCountOnMessageInDisk           int      8
maxMsgsNumBatch                           int      64
warmMapedFileEnable                       boolean  false
debugLockEnable                           boolean  false
duplicationEnable                         boolean  false
diskFallRecorded                          boolean  true
osPageCacheBusyTimeOutMills               long     1000
transientStorePoolSize                    int      5
fastFailIfNoBufferInStorePool             boolean  false
isEnableBatchPush                         boolean  false
enableScheduleMessageStats                boolean  true
enableLmq                                 boolean  false
enableMultiDispatch                       boolean  false
maxLmqConsumeQueueNum                     int      20000
enableScheduleAsyncDeliver                boolean  false
scheduleAsyncDeliverMaxPendingLimit       int      2000
scheduleAsyncDeliverMaxResendNum2Blocked  int      3
# NettyServerConfig
serverCallbackExecutorThreads             int      0
serverSelectorThreads                     int      3
serverOnewaySemaphoreValue                int      256
serverAsyncSemaphoreValue                 int      64
serverSocketSndBufSize                    int      0
serverSocketRcvBufSize                    int      0
writeBufferHighWaterMark                  int      0        (NettyClientConfig's too)
writeBufferLowWaterMark                   int      0
serverSocketBacklog                       int      1024
serverPooledByteBufAllocatorEnable        boolean  true
useEpollNativeSelector                    boolean  false
# NettyClientConfig
clientWorkerThreads                       int      4
clientOnewaySemaphoreValue                int      65535
clientAsyncSemaphoreValue                 int      65535
connectTimeoutMillis                      int      3000
channelNotActiveInterval                  long     60000
clientChannelMaxIdleTimeSeconds           int      120
clientSocketSndBufSize                    int      0
clientSocketRcvBufSize                    int      0
clientPooledByteBufAllocatorEnable        boolean  false
clientCloseSocketIfTimeout                boolean  true
"""
_BY_PROCESSORS = {  # Runtime.availableProcessors() in the defaults of BrokerConfig and NettyClientConfig
    "clientCallbackExecutorThreads": CPUS,
    "sendMessageThreadPoolNums": min(CPUS, 4),
    "putMessageFutureThreadPoolNums": min(CPUS, 4),
    "pullMessageThreadPoolNums": 16 + CPUS * 2,
    "processReplyMessageThreadPoolNums": 16 + CPUS * 2,
    "queryMessageThreadPoolNums": 8 + CPUS,
    "heartbeatThreadPoolNums": min(32, CPUS),
    "endTransactionThreadPoolNums": max(8 + CPUS * 2, min(CPUS, 4) * 4),
}


def _unimplemented(table: str) -> tuple[Key, ...]:
    """The rows of ``_NOT_IMPLEMENTED``."""
    rows = []
    for line in table.splitlines():
        if not line or line.startswith("#"):
            continue
        name, kind, default, *notes = line.split()
        rows.append(Key(name, kind, _typed(name, kind, default), shown="shown" in notes))
    return tuple(rows)


def _typed(name: str, kind: str, default: str) -> Any:
    if default in ("cpus", "-", '""'):
        return {"cpus": _BY_PROCESSORS.get(name), "-": None, '""': ""}[default]
    if kind == BOOL:
        return default == "true"
    return int(default) if kind in (INT, LONG) else default


TABLE: tuple[Key, ...] = (*_IMPLEMENTED, *_unimplemented(_NOT_IMPLEMENTED))
KEYS: dict[str, Key] = {key.name: key for key in TABLE}
IMPLEMENTED = frozenset(key.name for key in TABLE if key.implemented)

_KEY = "broker.conf key"  # the metadata entry ``setting`` gives an attribute


def owned(owner: str) -> tuple[Key, ...]:
    """The keys ``owner`` reads, in the table's order."""
    return tuple(key for key in TABLE if key.owner == owner)


def setting(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A typed view's attribute that holds key ``name``: its default is the table's (or
    ``default`` where the view keeps the value in another form)."""
    value = KEYS[name].default if default is dataclasses.MISSING else default
    return dataclasses.field(default=value, metadata={_KEY: name})


def settings_of(view: type) -> dict[str, str]:
    """The keys of a typed view (a dataclass): key name -> attribute, in the view's order."""
    return {f.metadata[_KEY]: f.name for f in dataclasses.fields(view) if _KEY in f.metadata}
