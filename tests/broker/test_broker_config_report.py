"""GET_BROKER_CONFIG of ``rmq serve`` reports broker.conf as configured: every key rmq implements with
its configured value, every other key as given (and named at start)."""

from __future__ import annotations

import json
from pathlib import Path

from rmqcli.broker.admin.config import IMPLEMENTED_KEYS, REPORTED_DEFAULTS
from tests.support.cli import invoke_rmq
from tests.support.ports import claim
from tests.support.serve import ServeProcess

UNIMPLEMENTED = {"transientStorePoolEnable": "true", "accessMessageInMemoryMaxRatio": "30", "fooBarKey": "42"}


def configured(store: Path, server: ServeProcess) -> dict[str, str]:
    """A value other than the default for every key rmq implements (where the broker can run so)."""
    return {
        "brokerName": "broker-conf",
        "brokerClusterName": "ConfCluster",
        "brokerId": "0",
        "listenPort": str(server.port),
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",
        "brokerRole": "SYNC_MASTER",
        "slaveReadEnable": "true",
        "offsetCheckInSlave": "true",
        "useServerSideResetOffset": "true",
        "namesrvAddr": server.namesrv,
        "flushDiskType": "SYNC_FLUSH",
        "flushIntervalCommitLog": "400",
        "syncFlushTimeout": "4000",
        "flushConsumerOffsetInterval": "4000",
        "autoCreateTopicEnable": "false",
        "autoCreateSubscriptionGroup": "false",
        "defaultTopicQueueNums": "4",
        "clusterTopicEnable": "false",
        "brokerTopicEnable": "false",
        "brokerPermission": "4",
        "longPollingEnable": "false",
        "enablePropertyFilter": "true",
        "shortPollingTimeMills": "900",
        "registerNameServerPeriod": "20000",
        "regionId": "RegionConf",
        "traceTopicEnable": "true",
        "msgTraceTopicName": "TraceConf",
        "traceOn": "false",
        "maxMessageSize": "1048576",
        "rejectTransactionMessage": "true",
        "transactionTimeOut": "5000",
        "transactionCheckMax": "5",
        "transactionCheckInterval": "30000",
        "flushDelayOffsetInterval": "9000",
        "aclEnable": "false",
        "maxTransferCountOnMessageInMemory": "16",
        "maxTransferBytesOnMessageInMemory": "131072",
        "defaultQueryMaxNum": "16",
        "haSendHeartbeatInterval": "4000",
        "haHousekeepingInterval": "15000",
        "haTransferBatchSize": "16384",
        "haSlaveFallbehindMax": "1048576",
        "slaveTimeout": "2000",
        "haMasterAddress": "127.0.0.1:1",
        "haListenPort": str(server.port + 1),
        "enableSlaveActingMaster": "true",
        "enableRemoteEscape": "true",
        "brokerHeartbeatInterval": "900",
        "brokerNotActiveTimeoutMillis": "9000",
        "syncBrokerMemberGroupPeriod": "900",
        "totalReplicas": "2",
        "inSyncReplicas": "2",
        "minInSyncReplicas": "1",
        "enableAutoInSyncReplicas": "true",
        "haMaxGapNotInSync": "1048576",
        "lockInStrictMode": "true",
        "rmqHaAllowedAddresses": "10.0.0.*",
        "fileReservedTime": "48",
        "deleteWhen": "03;15",
        "diskMaxUsedSpaceRatio": "85",
        "cleanResourceInterval": "5000",
        "deleteCommitLogFilesInterval": "50",
        "deleteConsumeQueueFilesInterval": "50",
        "destroyMapedFileIntervalForcibly": "60000",
        "redeleteHangedFileInterval": "60000",
        "cleanFileForciblyEnable": "false",
        "diskSpaceWarningLevelRatio": "95",
        "diskSpaceCleanForciblyRatio": "92",
        "deleteFileBatchMax": "5",
        "mappedFileSizeCommitLog": "65536",
        "mappedFileSizeConsumeQueue": "1000",
        "maxHashSlotNum": "64",
        "maxIndexNum": "256",
        "messageDelayLevel": "1s 2s",
        "messageIndexEnable": "false",
        "messageIndexSafe": "true",
        "checkCRCOnRecover": "false",
        "storePathCommitLog": str(store / "commitlog"),
        "storePathRootDir": str(store),
        # a DLedger group's keys, kept while enableDLegerCommitLog is false (tests/dledger: true)
        "enableDLegerCommitLog": "false",
        "dLegerGroup": "RaftConf",
        "dLegerPeers": "n0-127.0.0.1:1;n1-127.0.0.1:2",
        "dLegerSelfId": "n1",
        "preferredLeaderId": "n0",
        # metrics (5.1.1): served on a port of their own
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": str(claim()),
        "metricsLabel": "region:conf",
        "metricsInDelta": "true",
        "enableBatchPush": "true",
        # controller mode's keys, kept while enableControllerMode is false (tests/controller: true)
        "enableControllerMode": "false",
        "controllerAddr": "127.0.0.1:1;127.0.0.1:2",
        "fetchControllerAddrByDnsLookup": "false",
        "syncBrokerMetadataPeriod": "4000",
        "checkSyncStateSetPeriod": "4000",
        "syncControllerMetadataPeriod": "9000",
        "controllerHeartBeatTimeoutMills": "9000",
        "brokerElectionPriority": "3",
        "sendHeartbeatTimeoutMillis": "900",
        "allAckInSyncStateSet": "true",
        "haMaxTimeSlaveNotCatchup": "14000",
        "syncFromLastFile": "true",
        "asyncLearner": "true",
        "storePathEpochFile": str(store / "epochs"),
        "storePathBrokerIdentity": str(store / "identity"),
    }


def test_every_configured_key_round_trips_through_get_broker_config(tmp_path: Path) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    server = ServeProcess(store, conf)
    keys = configured(store, server)
    assert set(keys) == IMPLEMENTED_KEYS  # a key added to rmq is added here too
    conf.write_text("".join(f"{k}={v}\n" for k, v in {**keys, **UNIMPLEMENTED}.items()))
    with server:
        answer = invoke_rmq("getBrokerConfig", "-b", server.broker, "--json")
        assert answer.exit_code == 0, answer.output
        props = dict(json.loads(answer.stdout)[0]["properties"])
        assert {k: props.get(k) for k in keys} == keys
        assert {k: props.get(k) for k in UNIMPLEMENTED} == UNIMPLEMENTED  # reported as given
        assert props["serverWorkerThreads"] == REPORTED_DEFAULTS["serverWorkerThreads"]
        warnings = [line for line in server.output().splitlines() if "keys rmq does not implement" in line]
        assert len(warnings) == 1 and warnings[0].endswith(
            "accessMessageInMemoryMaxRatio, fooBarKey, transientStorePoolEnable"
        )
        assert "is not the STORE argument" not in server.output()
    # clusterTopicEnable and brokerTopicEnable off: their topics inherit only (TopicConfigManager)
    topics = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert topics["ConfCluster"]["perm"] == 1 and topics["broker-conf"]["perm"] == 1
