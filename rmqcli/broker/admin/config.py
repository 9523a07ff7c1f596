"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's ``Configuration`` (protocol.md B.4).

GET_BROKER_CONFIG reports every key rmq implements with the value in force (broker.conf's, the
command line's, or the default), every other key broker.conf gave as given (rmq serve names those at
start: they have no effect), and a few keys a 4.9.8 broker always shows with its defaults
(``REPORTED_DEFAULTS``). ``version`` is the configuration's own data version, moved by each update.

UPDATE_BROKER_CONFIG either applies all of its keys or none. A key is refused with a remark naming it
when it is not a broker setting, when rmq does not implement it, when its value does not parse, or
when it is only read at start (``RESTART_KEYS``: the store's layout and paths, the broker's identity,
role, ports and HA links, the flush mode, ACL, SlaveActingMaster, the trace topic); a 4.9.8 broker
takes those into its configuration file and half of its services follow. Changing
``brokerPermission`` bumps the topic data version and re-registers with the name servers. A real
broker also rewrites its configuration file (the ``-c`` file); ``rmq serve`` leaves the operator's
``--config`` untouched, so an update lasts until the broker stops.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rmqcli.broker.acl.brokerkeys import HIDDEN
from rmqcli.broker.acl.brokerkeys import SECRET_KEY as SIGNING_SECRET
from rmqcli.broker.acting.config import ActingConfig
from rmqcli.broker.autoswitch.config import AutoSwitchConfig
from rmqcli.broker.config import BrokerConfig, broker_config_from_properties
from rmqcli.broker.dledger.config import DLedgerConfig
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.metrics.config import MetricsConfig
from rmqcli.conf.keys import (
    ACTING,
    AUTOSWITCH,
    BROKER,
    DLEDGER,
    HA,
    METRICS,
    RETENTION,
    STORE,
    TABLE,
    settings_of,
)
from rmqcli.conf.parse import text
from rmqcli.errors import UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.bodies import properties_body, properties_text
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.retention import RetentionConfig
from rmqcli.store.settings import StoreSettings

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

# keys rmq does not implement that a 4.9.8 broker always reports, with its defaults (table order)
REPORTED_DEFAULTS = {key.name: text(key.default) for key in TABLE if key.shown and not key.implemented}
STORE_ROOT_KEY = "storePathRootDir"
# read once, at start: an update of these is refused
RESTART_KEYS = frozenset(key.name for key in TABLE if key.at_start)
# reported with the value in force, in the table's order (broker, store, HA, acting, retention)
IMPLEMENTED_KEYS = frozenset(key.name for key in TABLE if key.shown and key.implemented)
_VIEWS = {
    BROKER: BrokerConfig,
    STORE: StoreSettings,
    HA: HAConfig,
    ACTING: ActingConfig,
    RETENTION: RetentionConfig,
    DLEDGER: DLedgerConfig,
    METRICS: MetricsConfig,
    AUTOSWITCH: AutoSwitchConfig,
}
_ATTRIBUTES = {owner: settings_of(view) for owner, view in _VIEWS.items()}
_REPORTED = tuple(
    (key.name, key.owner, _ATTRIBUTES[key.owner][key.name])
    for key in TABLE
    if key.name in IMPLEMENTED_KEYS and key.name in _ATTRIBUTES[key.owner]
)


@dataclass
class ConfigState:
    """``Configuration.dataVersion``."""

    counter: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))


def config_state(ctl: BrokerContext) -> ConfigState:
    """The broker's configuration version (``BrokerContext.parts``)."""
    return ctl.parts.get(ConfigState, ConfigState)


def current_properties(ctl: BrokerContext) -> dict[str, str]:
    """Every configuration property with the value in force (see the module docstring)."""
    config = ctl.config
    views = {
        BROKER: config,
        STORE: ctl.writer.settings,
        HA: config.ha,
        ACTING: config.acting,
        RETENTION: config.retention,
        DLEDGER: config.dledger,
        METRICS: config.metrics,
        AUTOSWITCH: config.autoswitch,
    }
    props = dict(REPORTED_DEFAULTS)
    props.update(config.given)
    props.update({key: text(getattr(views[owner], attribute)) for key, owner, attribute in _REPORTED})
    if not ctl.writer.settings.store_path_commitlog:
        props["storePathCommitLog"] = str(ctl.writer.commitlog.directory)
    props[STORE_ROOT_KEY] = str(ctl.writer.root)
    if SIGNING_SECRET in props:
        props[SIGNING_SECRET] = HIDDEN
    return props


def refusal(key: str) -> str | None:
    """Why an update of ``key`` is refused, or ``None`` when it may take effect."""
    if key in RESTART_KEYS:
        return f"{key} is read only at start: set it in broker.conf and restart"
    if key in REPORTED_DEFAULTS:
        return f"{key} is not implemented by rmq"
    if key not in IMPLEMENTED_KEYS:
        return f"{key} is not a setting rmq implements"
    return None


def apply_update(ctl: BrokerContext, changes: dict[str, str]) -> list[str]:
    """``Configuration.update``, all keys or none: the refusals (empty when every key took effect)."""
    problems = [why for why in map(refusal, changes) if why]
    if problems:
        return problems
    merged = {**current_properties(ctl), **changes}
    try:
        new = broker_config_from_properties(merged)
    except UsageError as exc:
        return [str(exc).removeprefix("broker.conf: ")]
    old = ctl.config
    ctl.config = replace(
        new,
        broker_id=old.broker_id,
        ha=old.ha,
        acting=old.acting,
        store=old.store,
        pop=old.pop,
        timer=old.timer,
        given=old.given,
    )
    state = config_state(ctl)
    state.counter += 1
    state.timestamp = int(time.time() * 1000)
    return []


def update_broker_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if not req.body:
        return req.response()
    changes = properties_body(req.body)
    problems = apply_update(ctl, changes)
    if problems:
        return req.response(
            RS.SYSTEM_ERROR, "updateBrokerConfig refused, nothing changed: " + "; ".join(problems)
        )
    if "brokerPermission" in changes:  # the topic data version moves, then registerBrokerAll
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
