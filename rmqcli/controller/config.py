"""A controller's settings (5.1.1 ``ControllerConfig``, controller.md §4.1): the rows of
``rmqcli.conf.keys`` owned by the controller, read from ``rmq controller -c FILE`` or from the file
of ``rmq serve`` when ``enableControllerInNamesrv`` is on (§4.2).

``controllerDLegerPeers`` (``n0-host:port;n1-host:port``) and ``controllerDLegerSelfId`` are
required; the controller listens on its own peer's port, which also carries DLedger's RPC (§1.1).
``controllerStorePath`` and ``configStorePath`` default, as 5.1.1's, to ``~/DledgerController`` and
``~/controller/controller.properties``. ``scanNotActiveBrokerInterval`` is the NameServer's key,
which 5.1.1 reads into both configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rmqcli.conf.keys import setting
from rmqcli.conf.parse import BrokerConf
from rmqcli.dledger.member import parse_peers
from rmqcli.errors import UsageError


@dataclass(frozen=True)
class ControllerConfig:
    enable_in_namesrv: bool = setting("enableControllerInNamesrv")
    group: str = setting("controllerDLegerGroup")
    peers: str = setting("controllerDLegerPeers")
    self_id: str = setting("controllerDLegerSelfId")
    store_path: str = setting("controllerStorePath")
    config_store_path: str = setting("configStorePath")
    mapped_file_size: int = setting("mappedFileSize")
    enable_elect_unclean_master: bool = setting("enableElectUncleanMaster")
    process_read_event: bool = setting("processReadEvent")
    notify_broker_role_changed: bool = setting("notifyBrokerRoleChanged")
    scan_inactive_master_interval: int = setting("scanInactiveMasterInterval")
    scan_not_active_broker_interval: int = 5000  # the NameServer's key (see ``load``)

    def peer_map(self) -> dict[str, str]:
        """id -> ``host:port``; a usage error naming the key when it is empty or malformed, or
        when it lacks ``controllerDLegerSelfId`` (``ControllerManager.initialize``)."""
        if not self.peers.strip():
            raise UsageError("Attribute value controllerDLegerPeers of ControllerConfig is null or empty")
        if not self.self_id.strip():
            raise UsageError("Attribute value controllerDLegerSelfId of ControllerConfig is null or empty")
        try:
            peers = parse_peers(self.peers)
        except ValueError as exc:
            raise UsageError(f"controllerDLegerPeers: {exc}") from None
        if self.self_id not in peers:
            raise UsageError(f"controllerDLegerSelfId={self.self_id} is not one of controllerDLegerPeers")
        return peers

    @property
    def store_root(self) -> Path:
        return Path(self.store_path) if self.store_path else Path.home() / "DledgerController"

    @property
    def member_home(self) -> Path:
        """``controllerStorePath/dledger-<selfId>`` (§3.3)."""
        return self.store_root / f"dledger-{self.self_id}"

    @property
    def config_file(self) -> Path:
        if self.config_store_path:
            return Path(self.config_store_path)
        return Path.home() / "controller" / "controller.properties"


def load(conf: BrokerConf) -> ControllerConfig:
    """The controller's settings in ``conf`` (a bad value stops here, naming its key)."""
    config = conf.view(ControllerConfig)
    return replace(config, scan_not_active_broker_interval=conf.value("scanNotActiveBrokerInterval"))


def java_properties(c: ControllerConfig) -> dict[str, str]:
    """The settings by their Java field names, as GET_CONTROLLER_CONFIG (1010) and ``-p`` print
    them (so ``processReadEvent`` is ``isProcessReadEvent``, §4.1)."""
    return {
        "configStorePath": str(c.config_file),
        "scanNotActiveBrokerInterval": str(c.scan_not_active_broker_interval),
        "controllerDLegerGroup": c.group,
        "controllerDLegerPeers": c.peers,
        "controllerDLegerSelfId": c.self_id,
        "mappedFileSize": str(c.mapped_file_size),
        "controllerStorePath": str(c.store_root),
        "enableElectUncleanMaster": _java_bool(c.enable_elect_unclean_master),
        "isProcessReadEvent": _java_bool(c.process_read_event),
        "notifyBrokerRoleChanged": _java_bool(c.notify_broker_role_changed),
        "scanInactiveMasterInterval": str(c.scan_inactive_master_interval),
    }


def _java_bool(value: bool) -> str:
    return "true" if value else "false"
