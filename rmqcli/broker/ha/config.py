"""The HA settings of one broker (``MessageStoreConfig`` of RocketMQ 4.9.8), in milliseconds and bytes.

The keys, their types and 4.9.8's defaults are rows of ``rmqcli.conf.keys``; ``rmqcli.broker.config``
reads them from ``broker.conf`` with ``ha_config_from_properties``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from rmqcli.conf.keys import ROLES, setting
from rmqcli.conf.parse import conf_of

ASYNC_MASTER, SYNC_MASTER, SLAVE = ROLES  # MessageStoreConfig.brokerRole


@dataclass(frozen=True)
class HAConfig:
    ha_send_heartbeat_interval: int = setting("haSendHeartbeatInterval")  # ms: slave reports, heartbeats
    # ms: a connection silent this long is closed
    ha_housekeeping_interval: int = setting("haHousekeepingInterval")
    ha_transfer_batch_size: int = setting("haTransferBatchSize")  # bytes per push at most
    # isSlaveOK: the slave is close enough
    ha_slave_fallbehind_max: int = setting("haSlaveFallbehindMax")
    # ms: SYNC_MASTER's wait for a slave (CommitLog.submitReplicaRequest)
    slave_timeout: int = setting("slaveTimeout")
    # a slave's master HA address; else from registration
    ha_master_address: str | None = setting("haMasterAddress")
    ha_listen_port: int = setting("haListenPort")  # BrokerStartup sets listenPort + 1 (see below)
    # rmq's own ``rmqHaAllowedAddresses``: with aclEnable, who else may connect to the HA port
    # (comma-separated white-list patterns; rmqcli.broker.acl.hagate)
    allowed_addresses: str = setting("rmqHaAllowedAddresses")

    @property
    def heartbeat_seconds(self) -> float:
        return self.ha_send_heartbeat_interval / 1000

    @property
    def housekeeping_seconds(self) -> float:
        return self.ha_housekeeping_interval / 1000

    @property
    def slave_timeout_seconds(self) -> float:
        return self.slave_timeout / 1000


def ha_config_from_properties(props: Mapping[str, str]) -> HAConfig:
    """``HAConfig`` from ``broker.conf`` properties (a period, size or port must be positive).

    ``haListenPort`` defaults to ``listenPort + 1``. 4.9.8's ``BrokerStartup`` sets it to
    ``listenPort + 1`` after reading the file, so a 4.9.8 broker ignores the key; rmq honours it.
    ``haMasterAddress`` counts only from 6 characters on (``BrokerController.initialize``).
    ``rmqHaAllowedAddresses`` is rmq's own (``rmqcli.broker.acl.hagate``).
    """
    conf = conf_of(props)
    changes = conf.values(HAConfig, given_only=True)
    address = changes.get("ha_master_address")
    if address is not None and len(address) < 6:
        changes["ha_master_address"] = None
    if "ha_listen_port" not in changes:
        changes["ha_listen_port"] = conf.value("listenPort") + 1
    return replace(HAConfig(), **changes)
