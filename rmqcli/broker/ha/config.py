"""The HA settings of one broker (``MessageStoreConfig`` of RocketMQ 4.9.8), in milliseconds and bytes.

Defaults are 4.9.8's; ``rmqcli.broker.config`` reads them from ``broker.conf`` with
``ha_config_from_properties``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from rmqcli.errors import UsageError

DEFAULT_LISTEN_PORT = 10911

ASYNC_MASTER = "ASYNC_MASTER"  # MessageStoreConfig.brokerRole
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"
ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)


@dataclass(frozen=True)
class HAConfig:
    ha_send_heartbeat_interval: int = 5000  # ms: slave reports, master heartbeats
    ha_housekeeping_interval: int = 20000  # ms: a connection silent this long is closed
    ha_transfer_batch_size: int = 32 * 1024  # bytes per push at most
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024  # isSlaveOK: the slave is close enough
    slave_timeout: int = 3000  # ms: SYNC_MASTER's wait for a slave (CommitLog.submitReplicaRequest)
    ha_master_address: str | None = None  # a slave's master HA address; else from registration
    ha_listen_port: int = DEFAULT_LISTEN_PORT + 1  # BrokerStartup sets listenPort + 1 (see below)
    # rmq's own ``rmqHaAllowedAddresses``: with aclEnable, who else may connect to the HA port
    # (comma-separated white-list patterns; rmqcli.broker.acl.hagate)
    allowed_addresses: str = ""

    @property
    def heartbeat_seconds(self) -> float:
        return self.ha_send_heartbeat_interval / 1000

    @property
    def housekeeping_seconds(self) -> float:
        return self.ha_housekeeping_interval / 1000

    @property
    def slave_timeout_seconds(self) -> float:
        return self.slave_timeout / 1000


ALLOWED_KEY = "rmqHaAllowedAddresses"
PROPERTY_NAMES = {
    "haSendHeartbeatInterval": "ha_send_heartbeat_interval",
    "haHousekeepingInterval": "ha_housekeeping_interval",
    "haTransferBatchSize": "ha_transfer_batch_size",
    "haSlaveFallbehindMax": "ha_slave_fallbehind_max",
    "slaveTimeout": "slave_timeout",
    "haMasterAddress": "ha_master_address",
    "haListenPort": "ha_listen_port",
    ALLOWED_KEY: "allowed_addresses",
}


def ha_config_from_properties(props: dict[str, str]) -> HAConfig:
    """``HAConfig`` from ``broker.conf`` properties.

    ``haListenPort`` defaults to ``listenPort + 1``. 4.9.8's ``BrokerStartup`` sets it to
    ``listenPort + 1`` after reading the file, so a 4.9.8 broker ignores the key; rmq honours it.
    ``haMasterAddress`` counts only from 6 characters on (``BrokerController.initialize``).
    ``rmqHaAllowedAddresses`` is rmq's own (``rmqcli.broker.acl.hagate``).
    """
    kinds = {f.name: f.type for f in fields(HAConfig)}
    changes: dict[str, object] = {}
    for key, name in PROPERTY_NAMES.items():
        raw = props.get(key)
        if raw is None:
            continue
        raw = raw.strip()
        if key == ALLOWED_KEY:
            changes[name] = raw
        elif kinds[name] == "int":
            try:
                value = int(raw)
            except ValueError as exc:
                raise UsageError(f"broker.conf: {key}={raw!r} is not an integer") from exc
            if value <= 0:
                raise UsageError(f"broker.conf: {key}={raw!r} must be positive")
            changes[name] = value
        else:
            changes[name] = raw if len(raw) >= 6 else None
    if "ha_listen_port" not in changes:
        try:
            listen = int(props.get("listenPort", DEFAULT_LISTEN_PORT))
        except ValueError as exc:
            raise UsageError(f"broker.conf: listenPort={props['listenPort']!r} is not an integer") from exc
        changes["ha_listen_port"] = listen + 1
    return replace(HAConfig(), **changes)
