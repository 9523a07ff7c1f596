"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's ``Configuration`` (PROTOCOL.md B.4).

The properties are those of ``BrokerConfig``, ``NettyServerConfig`` and ``MessageStoreConfig`` that
this broker has, with 4.9.7's defaults for the ones it only reports (``fileReservedTime`` is used by
DELETE_EXPIRED_COMMITLOG). An update changes only keys that exist (``Configuration.mergeIfExist``);
a value that does not parse for its key is ignored, as ``MixAll.properties2Object`` ignores it; every
update moves the configuration's own data version (the ``version`` header of GET_BROKER_CONFIG).
Changing ``brokerPermission`` bumps the topic data version and re-registers with the name servers.
A real broker also rewrites its configuration file (the ``-c`` file); ``rmq serve`` leaves the
operator's ``--config`` untouched, so an update lasts until the broker stops. The role and HA keys
(``brokerRole``, ``brokerId``, ``haListenPort``...) are set up at start and not changed by an
update (4.9.8 sets the field and half of its services follow it): a warning is logged.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rmqcli.broker.bodies import properties_body, properties_text
from rmqcli.broker.config import PROPERTY_NAMES as BROKER_KEYS
from rmqcli.broker.config import broker_config_from_properties
from rmqcli.broker.connection import Connection, Reply
from rmqcli.broker.ha.config import PROPERTY_NAMES as HA_KEYS
from rmqcli.errors import UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.store.settings import PROPERTY_NAMES

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

# MessageStoreConfig / NettyServerConfig keys reported with their 4.9.7 defaults
REPORTED_DEFAULTS = {
    "fileReservedTime": "72",
    "deleteWhen": "04",
    "diskMaxUsedSpaceRatio": "75",
    "cleanResourceInterval": "10000",
    "deleteCommitLogFilesInterval": "100",
    "deleteConsumeQueueFilesInterval": "100",
    "destroyMapedFileIntervalForcibly": "120000",
    "cleanFileForciblyEnable": "true",
    "maxTransferCountOnMessageInMemory": "32",
    "maxTransferBytesOnMessageInMemory": "262144",
    "accessMessageInMemoryMaxRatio": "40",
    "defaultQueryMaxNum": "32",
    "transientStorePoolEnable": "false",
    "serverWorkerThreads": "8",
    "serverChannelMaxIdleTimeSeconds": "120",
}
# the broker's role and HA links are set up at start; a running rmq broker does not change them
FIXED_AT_START = frozenset({"brokerRole", "brokerId", "brokerIP2", *HA_KEYS})
_STORE_KEYS = {k: v for k, v in PROPERTY_NAMES.items() if k != "storePathCommitLog"}  # store part


@dataclass
class ConfigState:
    """What UPDATE_BROKER_CONFIG changed, and ``Configuration.dataVersion``."""

    updated: dict[str, str] = field(default_factory=dict)
    counter: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))


_states: weakref.WeakKeyDictionary[BrokerContext, ConfigState] = weakref.WeakKeyDictionary()


def config_state(ctl: BrokerContext) -> ConfigState:
    state = _states.get(ctl)
    if state is None:
        state = _states[ctl] = ConfigState()
    return state


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def current_properties(ctl: BrokerContext) -> dict[str, str]:
    """Every configuration property with its current value."""
    props = {key: _text(getattr(ctl.config, name)) for key, name in BROKER_KEYS.items()}
    props.update({key: _text(getattr(ctl.writer.settings, name)) for key, name in _STORE_KEYS.items()})
    props.update({key: _text(getattr(ctl.config.ha, name)) for key, name in HA_KEYS.items()})
    props["storePathRootDir"] = str(ctl.writer.root)
    props.update(REPORTED_DEFAULTS)
    props.update(config_state(ctl).updated)
    return props


def apply_update(ctl: BrokerContext, changes: dict[str, str]) -> list[str]:
    """``Configuration.update``: the keys that exist and parse take the new values; returns them."""
    props = current_properties(ctl)
    state = config_state(ctl)
    applied = []
    for key, value in changes.items():
        if key not in props:
            continue
        if key in FIXED_AT_START:
            log.warning("UPDATE_BROKER_CONFIG: %s takes effect at the next start only; not changed", key)
            continue
        if key in BROKER_KEYS:
            try:
                new = broker_config_from_properties({**props, key: value})
            except UsageError:
                continue
            ctl.config = replace(new, store=ctl.config.store)
        elif key in REPORTED_DEFAULTS and REPORTED_DEFAULTS[key].lstrip("-").isdigit():
            if not value.strip().lstrip("-").isdigit():
                continue
        props[key] = value
        state.updated[key] = value
        applied.append(key)
    state.counter += 1
    state.timestamp = int(time.time() * 1000)
    return applied


def update_broker_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if req.body:
        applied = apply_update(ctl, properties_body(req.body))
        if "brokerPermission" in applied:  # the topic data version moves, then registerBrokerAll
            ctl.writer.config.topics_version.bump(ctl.writer.clock())
            ctl.topics.on_change()
    return req.response()


def broker_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getAllConfigsFormatString`` as the body, ``Configuration.getDataVersionJson`` as ``version``."""
    state = config_state(ctl)
    version = jb.encode(jb.DataVersion(counter=state.counter, timestamp=state.timestamp)).decode()
    body = properties_text(current_properties(ctl))
    return req.response(header=hd.GetBrokerConfigResponseHeader(version=version), body=body)


HANDLERS = {
    RC.UPDATE_BROKER_CONFIG: update_broker_config,
    RC.GET_BROKER_CONFIG: broker_config,
}
