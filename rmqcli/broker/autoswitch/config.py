"""The controller-mode keys of broker.conf (5.1.1 ``BrokerConfig`` and ``MessageStoreConfig``,
docs/controller.md §5.1); rows of ``rmqcli.conf.keys`` (owner ``autoswitch``). ``inSyncReplicas``,
``minInSyncReplicas`` and ``brokerHeartbeatInterval`` are SlaveActingMaster's rows, read from
``ActingConfig``; ``haMaxGapNotInSync`` has no effect in controller mode, as in 5.1.1."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from formats import epoch as efmt
from rmqcli.conf.keys import setting


@dataclass(frozen=True)
class AutoSwitchConfig:
    enable: bool = setting("enableControllerMode")
    controller_addr: str = setting("controllerAddr")  # ";"-separated host:port of the controllers
    fetch_by_dns: bool = setting("fetchControllerAddrByDnsLookup")  # false only (true is named at start)
    sync_broker_metadata_period: int = setting("syncBrokerMetadataPeriod")  # ms: the 1004 poll
    check_sync_state_set_period: int = setting("checkSyncStateSetPeriod")  # ms: the master's shrink check
    sync_controller_metadata_period: int = setting("syncControllerMetadataPeriod")  # ms: the 1005 poll
    controller_heartbeat_timeout: int = setting("controllerHeartBeatTimeoutMills")  # ms, sent in 904
    election_priority: int = setting("brokerElectionPriority")  # sent in 904; lower is preferred
    send_heartbeat_timeout: int = setting("sendHeartbeatTimeoutMillis")  # ms
    all_ack_in_sync_state_set: bool = setting("allAckInSyncStateSet")  # a send waits for the whole set
    ha_max_time_slave_not_catchup: int = setting("haMaxTimeSlaveNotCatchup")  # ms behind: out of the set
    sync_from_last_file: bool = setting("syncFromLastFile")  # an empty slave starts at the last file
    async_learner: bool = setting("asyncLearner")  # never joins the in-sync set
    epoch_file: str | None = setting("storePathEpochFile")
    identity_file: str | None = setting("storePathBrokerIdentity")

    @property
    def controllers(self) -> list[str]:
        """``controllerAddr`` split on ``;``, blanks dropped."""
        return [a.strip() for a in self.controller_addr.split(";") if a.strip()]

    def epoch_path(self, root: Path) -> Path:
        return Path(self.epoch_file) if self.epoch_file else root / efmt.EPOCH_FILE

    def identity_path(self, root: Path) -> Path:
        return Path(self.identity_file) if self.identity_file else root / efmt.IDENTITY_FILE
