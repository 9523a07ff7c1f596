"""broker.conf's one table of keys (``rmqcli.conf.keys``) and its one parser (``rmqcli.conf.parse``):
the Java broker's parsing rules, the table against the typed views, GET_BROKER_CONFIG and the
warning about keys rmq does not implement, ``rmq serve`` reading the file once, and the 4.9.8 rows
against what a real 4.9.8 broker reports for GET_BROKER_CONFIG."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqcli.broker.acl.brokerkeys import SigningKeys, configured_credentials
from rmqcli.broker.acting.config import ActingConfig
from rmqcli.broker.admin.config import IMPLEMENTED_KEYS, REPORTED_DEFAULTS, RESTART_KEYS, current_properties
from rmqcli.broker.autoswitch.config import AutoSwitchConfig
from rmqcli.broker.config import BrokerConfig, broker_config_from_properties
from rmqcli.broker.dledger.config import DLedgerConfig
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.metrics.config import MetricsConfig
from rmqcli.broker.pop.config import PopConfig
from rmqcli.broker.serve import ServeFlags, prepare, unimplemented_keys
from rmqcli.broker.timer.config import TimerConfig
from rmqcli.conf import keys as k
from rmqcli.conf.parse import BrokerConf, parse_value, read_properties, text
from rmqcli.controller.config import ControllerConfig
from rmqcli.errors import UsageError
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.server.connection import MAX_CONNECTIONS, MAX_PENDING_FRAME_BYTES
from rmqcli.store.retention import RetentionConfig
from rmqcli.store.settings import StoreSettings
from tests.support.cli import invoke_rmq
from tests.support.oracle import real_cluster
from tests.support.reads import counted_reads

VIEWS = {
    k.BROKER: BrokerConfig,
    k.STORE: StoreSettings,
    k.HA: HAConfig,
    k.ACTING: ActingConfig,
    k.RETENTION: RetentionConfig,
    k.POP: PopConfig,
    k.TIMER: TimerConfig,
    k.ACL: SigningKeys,
    k.DLEDGER: DLedgerConfig,
    k.METRICS: MetricsConfig,
    k.CONTROLLER: ControllerConfig,
    k.AUTOSWITCH: AutoSwitchConfig,
}
# keys rmq implements that no view holds: read where they act
UNVIEWED = {"storePathRootDir", "compatibleWithOldNameSrv"} | {
    key.name for key in k.TABLE if key.owner in (k.NAMESRV, k.SERVE)
}


def refusal(name: str, raw: str) -> str:
    with pytest.raises(UsageError) as info:
        parse_value(k.KEYS[name], raw)
    message = str(info.value)
    assert message.startswith("broker.conf: ") and name in message and "\n" not in message
    return message.removeprefix("broker.conf: ")


# --- the parser: Java's rules ----------------------------------------------------------------------
def test_a_boolean_is_true_for_true_in_any_case_and_false_for_anything_else() -> None:
    """``Boolean.parseBoolean``; a key whose range is true/false refuses any other text."""
    key = k.KEYS["autoCreateTopicEnable"]
    assert [parse_value(key, raw) for raw in ("true", "TRUE", " True ", "tRuE")] == [True] * 4
    assert [parse_value(key, raw) for raw in ("false", "yes", "1", "on", "")] == [False] * 5
    assert refusal("enableSlaveActingMaster", "yes") == "enableSlaveActingMaster='yes' is not true or false"
    assert parse_value(k.KEYS["enableSlaveActingMaster"], "FALSE") is False


def test_an_int_or_a_long_is_a_sign_and_digits_within_the_java_range() -> None:
    """``Integer.parseInt`` / ``Long.parseLong``: an optional sign, decimal digits (any Unicode
    decimal digit, as ``Character.digit``), nothing else, within 32 or 64 bits."""
    port, brokerid = k.KEYS["maxMessageSize"], k.KEYS["brokerId"]
    assert [parse_value(port, raw) for raw in ("+5", "-0", "007", " 42 ", "2147483647", "١٢")] == [
        5, 0, 7, 42, 2**31 - 1, 12,
    ]  # fmt: skip
    for raw in ("2147483648", "-2147483649", "1_000", "0x10", "1.5", "1e3", "", "+", "4 096"):
        assert refusal("maxMessageSize", raw) == f"maxMessageSize={raw.strip()!r} is not valid"
    assert parse_value(brokerid, "9223372036854775807") == 2**63 - 1
    assert refusal("brokerId", "9223372036854775808") == "brokerId='9223372036854775808' is not valid"


def test_an_enum_is_one_of_its_names_case_and_all() -> None:
    """``Enum.valueOf`` (brokerRole, flushDiskType): a Java broker drops another value, rmq refuses it."""
    assert parse_value(k.KEYS["brokerRole"], " SLAVE ") == "SLAVE"
    assert (
        refusal("brokerRole", "slave")
        == "brokerRole must be one of ASYNC_MASTER, SYNC_MASTER, SLAVE, not 'slave'"
    )
    assert (
        refusal("flushDiskType", "SYNC") == "flushDiskType must be one of ASYNC_FLUSH, SYNC_FLUSH, not 'SYNC'"
    )


def test_the_ranges_rmq_takes() -> None:
    assert refusal("reviveQueueNum", "0") == "reviveQueueNum=0 is outside [1, 64]"
    assert refusal("reviveQueueNum", "65") == "reviveQueueNum=65 is outside [1, 64]"
    assert parse_value(k.KEYS["reviveQueueNum"], "64") == 64
    assert refusal("haSendHeartbeatInterval", "0").endswith("must be positive")
    assert refusal("scanNotActiveBrokerInterval", "-5").startswith(
        "scanNotActiveBrokerInterval='-5' is not a positive number"
    )
    assert parse_value(k.KEYS["popPollingSize"], "0") == 0  # a lower bound of 0
    assert parse_value(k.KEYS["msgTraceTopicName"], "  T  ") == "T"  # every value trimmed


def test_read_properties_takes_both_separators_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("# comment\n! too\n\nbrokerName = b1 \nlistenPort:20911\nflag\n")
    assert read_properties(path) == {"brokerName": "b1", "listenPort": "20911", "flag": ""}
    conf = BrokerConf(read_properties(path))
    assert list(conf) == ["brokerName", "listenPort", "flag"] and conf.value("listenPort") == 20911


def test_a_value_is_parsed_when_asked_for() -> None:
    """An offline command reading the store's keys is not stopped by a bad broker key."""
    conf = BrokerConf({"transactionCheckMax": "many", "mappedFileSizeCommitLog": "65536"})
    assert conf.values(StoreSettings, given_only=True) == {"mapped_file_size_commitlog": 65536}
    with pytest.raises(UsageError, match="transactionCheckMax='many' is not valid"):
        broker_config_from_properties(conf)


# --- the table -------------------------------------------------------------------------------------
def test_every_row_is_well_formed() -> None:
    assert len(k.KEYS) == len(k.TABLE)  # one row a name
    python = {k.BOOL: bool, k.INT: int, k.LONG: int, k.STR: str, k.ENUM: str}
    owners = {
        k.BROKER,
        k.STORE,
        k.HA,
        k.ACTING,
        k.RETENTION,
        k.POP,
        k.TIMER,
        k.NAMESRV,
        k.SERVE,
        k.ACL,
        k.DLEDGER,
        k.METRICS,
        k.CONTROLLER,
        k.AUTOSWITCH,
        "",
    }
    for key in k.TABLE:
        assert key.kind in python and key.owner in owners and key.origin in (k.V4, k.V5, k.RMQ), key
        assert key.default is None or type(key.default) is python[key.kind], key
        if key.default is not None and key.kind in (k.INT, k.LONG):
            parse_value(key, str(key.default))  # a default within the range rmq takes
        assert (key.kind == k.ENUM) == (bool(key.choices) and key.kind != k.BOOL), key
        assert key.kind in (k.INT, k.LONG) or (key.low is None and key.high is None), key
        assert key.only is None or key.kind == k.BOOL, key
        assert not key.at_start or key.implemented, key
        assert key.origin != k.RMQ or key.name.startswith("rmq") or key.name == "timerMaxPending", key
    assert (MAX_PENDING_FRAME_BYTES, MAX_CONNECTIONS) == (
        k.KEYS["rmqMaxPendingFrameBytes"].default,
        k.KEYS["rmqMaxConnections"].default,
    )


def test_the_views_take_their_keys_and_defaults_from_the_table() -> None:
    viewed = set()
    for owner, view in VIEWS.items():
        names = k.settings_of(view)
        assert {k.KEYS[name].owner for name in names} <= {owner}, view
        viewed |= set(names)
        defaults = dataclasses.asdict(view())
        for name, attribute in names.items():
            if name not in ("storePathCommitLog",):  # kept as a tuple of paths
                assert defaults[attribute] == k.KEYS[name].default, name
    assert viewed | UNVIEWED == set(k.IMPLEMENTED)
    assert not viewed & UNVIEWED


def test_the_broker_signs_with_the_keys_broker_conf_gives() -> None:
    """``rmqBrokerAccessKey``/``rmqBrokerSecretKey`` through their rows (``SigningKeys``): trimmed
    as every value, both or neither."""
    given = {"rmqBrokerAccessKey": " rocketmq2 ", "rmqBrokerSecretKey": "12345678"}
    config = broker_config_from_properties(given)
    assert configured_credentials(config) == Credentials("rocketmq2", "12345678")
    assert configured_credentials(broker_config_from_properties({"rmqBrokerAccessKey": " "})) is None
    with pytest.raises(UsageError, match="rmqBrokerAccessKey and rmqBrokerSecretKey go together"):
        configured_credentials(broker_config_from_properties({"rmqBrokerSecretKey": "12345678"}))


def test_get_broker_config_the_warning_and_the_refusals_derive_from_the_table() -> None:
    assert IMPLEMENTED_KEYS == {key.name for key in k.TABLE if key.implemented and key.shown}
    assert list(REPORTED_DEFAULTS) == [key.name for key in k.TABLE if key.shown and not key.implemented]
    assert REPORTED_DEFAULTS["clientCallbackExecutorThreads"] == str(k.CPUS)
    assert RESTART_KEYS <= IMPLEMENTED_KEYS
    unknown = {"fooBarKey": "1", "transientStorePoolEnable": "true", "serverWorkerThreads": "4"}
    given = {
        key.name: text(key.default if key.only is None else key.only) for key in k.TABLE if key.implemented
    }
    given |= unknown
    assert unimplemented_keys(given) == sorted(unknown)
    # implemented with one value only: another is named
    assert unimplemented_keys({"compatibleWithOldNameSrv": "true", "notifyMinBrokerIdChanged": "TRUE"}) == [
        "compatibleWithOldNameSrv",
        "notifyMinBrokerIdChanged",
    ]
    assert unimplemented_keys({"compatibleWithOldNameSrv": "False"}) == []


def test_get_broker_config_reports_in_table_order_after_the_files_keys() -> None:
    conf = BrokerConf({"fooBarKey": "1", "deleteWhen": "03", "brokerName": "b1", "rmqBrokerSecretKey": "s"})
    config = broker_config_from_properties(conf)
    writer = SimpleNamespace(
        settings=config.store, commitlog=SimpleNamespace(directory=Path("/s/commitlog")), root=Path("/s")
    )
    props = current_properties(SimpleNamespace(config=config, writer=writer))  # type: ignore[arg-type]
    shown = [key.name for key in k.TABLE if key.name in IMPLEMENTED_KEYS and key.name not in conf]
    assert list(props) == [*REPORTED_DEFAULTS, *conf, *shown]
    assert props["deleteWhen"] == "03" and props["brokerName"] == "b1" and props["fooBarKey"] == "1"
    assert props["rmqBrokerSecretKey"] == "******" and props["storePathRootDir"] == "/s"
    assert props["haMasterAddress"] == "" and props["storePathCommitLog"] == "/s/commitlog"


def test_rmq_serve_reads_broker_conf_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nrmqMaxConnections=7\nsupportActingMaster=true\nfooBarKey=1\n")
    reads = counted_reads(monkeypatch)
    options, warnings = prepare(ServeFlags(tmp_path / "store", conf, grpc_port=0))
    assert reads.count(conf) == 1
    assert options.config.broker_name == "b1" and options.max_connections == 7
    assert options.namesrv_config is not None and options.namesrv_config["supportActingMaster"] == "true"
    assert len(warnings) == 1 and warnings[0].endswith("without effect): fooBarKey")
    assert not (tmp_path / "store").exists()


# --- the 4.9.8 rows against a real 4.9.8 broker ---------------------------------------------------------
SET_BY_THE_TEST = {  # tests.support.oracle.write_broker_conf's keys
    "brokerClusterName", "brokerName", "brokerId", "brokerRole", "flushDiskType", "listenPort",
    "haListenPort", "namesrvAddr", "brokerIP1", "brokerIP2", "storePathRootDir",
    "mappedFileSizeCommitLog", "diskMaxUsedSpaceRatio",
}  # fmt: skip


@pytest.mark.java
def test_the_4_9_8_rows_are_what_a_4_9_8_broker_reports(tmp_path: Path) -> None:
    """GET_BROKER_CONFIG of the kit's broker: every key it reports is a 4.9.8 row (and a row it
    does not report has no default: Java's null), each with the row's default and type."""
    with real_cluster(tmp_path) as real:
        answer = invoke_rmq("getBrokerConfig", "-b", real.broker, "--json")
    assert answer.exit_code == 0, answer.output
    reported = dict(json.loads(answer.stdout)[0]["properties"])
    rows = {key.name: key for key in k.TABLE if key.origin == k.V4}
    assert set(reported) <= set(rows)
    for name in set(rows) - set(reported):  # a null a Java broker does not print
        assert rows[name].default is None or rows[name].differs, name
    for name, value in reported.items():
        key = rows[name]
        if key.kind == k.BOOL:
            assert value in ("true", "false"), name
        elif key.kind in (k.INT, k.LONG):
            assert parse_value(key, value) is not None, name
        elif key.kind == k.ENUM:
            assert value in key.choices, name
        if name not in SET_BY_THE_TEST and not key.differs and key.default is not None:
            assert value == text(key.default), name
