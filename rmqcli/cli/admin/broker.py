"""mqadmin's cluster, broker and name server commands (``tools.command.cluster``, ``.broker``,
``.namesrv``): clusterList, clusterRT, brokerStatus, getBrokerConfig, updateBrokerConfig, wipeWritePerm,
addWritePerm, getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig,
cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic (protocol.md C.2, C.4.1, C.4.7); and
RocketMQ 5's haStatus (``tools.command.ha``), which rmq brokers answer and 4.x brokers do not;
getBrokerMemberGroup (RocketMQ 5's GET_BROKER_MEMBER_GROUP, no mqadmin command of its own)."""

from __future__ import annotations

from typing import Any

from rmqcli.cli.admin.registry import (
    AMOUNT,
    ROUNDS,
    SIZE,
    AdminCommand,
    Args,
    Family,
    Lazy,
    Opt,
    broker_addr,
    broker_or_cluster,
    broker_or_cluster_options,
    cluster_name,
    fail_first,
    failed,
    opt,
    parse_boolean,
    required,
    without_broker,
)
from rmqcli.errors import UsageError

brokers = Lazy("rmqcli.admin.broker")
cluster_rts = Lazy("rmqcli.admin.clusterrt")
broker_text = Lazy("rmqcli.cli.admin.format")
BROKERS = Family(brokers, broker_text, "broker")

CONFIG_KEY = required("key", "--key", "-k", "config key")
CONFIG_VALUE = required("value", "--value", "-v", "config value")
UPDATE_WHICH = broker_or_cluster_options("update")
BROKER_ADDRESS = broker_addr("Broker address")


cluster_list = BROKERS.command(
    "clusterList",
    "List all of clusters",
    (
        opt("more_stats", "--moreStats", "-m", "Print more stats", bool, False),
        opt("interval", "--interval", "-i", "specify intervals numbers, it is in seconds", int),
        ROUNDS,
    ),
    group="cluster",
    params=(),
    text=lambda rows, a: (
        broker_text.cluster_list_more(rows) if a.more_stats else broker_text.cluster_list(rows)
    ),
    fail=lambda rows: fail_first([r for r in rows if r.error]),
    repeat=lambda a: (a.interval, a.rounds),
)


def _check_cluster_rt(args: Args) -> None:
    """mqadmin cannot print NaN (one message) as a tlog; a negative interval fails its sleep."""
    if parse_boolean(args.print_log) and args.amount == 1:
        raise UsageError("-p true cannot print the average of a single message (NaN): use -a 2 or more")
    if args.interval < 0:
        raise UsageError("-i/--interval must not be negative")


def _cluster_rt_data(result: Any, args: Args) -> dict[str, Any]:
    """One ``--json`` document per round (an rt of NaN, one message, is null)."""
    return {
        "round": result.round,
        "rows": [
            {
                "cluster": r.cluster,
                "brokerName": r.broker_name,
                "rt": None if r.rt != r.rt else r.rt,
                "successCount": r.success_count,
                "failCount": r.fail_count,
                "timestamp": r.at_millis,
                "lastError": r.last_error,
            }
            for r in result.rows
        ],
        "missingCluster": result.missing_cluster,
    }


cluster_rt = BROKERS.command(
    "clusterRT",
    "List All clusters Message Send RT",
    (
        AMOUNT,
        SIZE,
        opt("cluster", "--cluster", "-c", "cluster name | default display all cluster"),
        # mqadmin's long names ("print log", "machine room") hold a space: only -p and -m work
        Opt("print_log", ("-p",), "print as tlog | default false"),
        Opt("machine_room", ("-m",), "machine room name | default noname", str, "noname"),
        opt("interval", "--interval", "-i", "print interval | default 10 seconds", int, 10),
        opt(
            "rounds",
            "--rounds",
            None,
            "Stop after this many rounds (0: run until interrupted, as mqadmin).",
            int,
            0,
        ),
    ),
    group="cluster",
    call=lambda s, a: cluster_rts.cluster_rt(s, vars(a).setdefault("_run", {}), a.amount, a.size, a.cluster),
    text=lambda result, a: broker_text.cluster_rt(result, parse_boolean(a.print_log), a.machine_room.strip()),
    data=_cluster_rt_data,
    check=_check_cluster_rt,
    repeat=lambda a: (a.interval or 0.001, a.rounds),  # -i 0: again at once, as mqadmin
)

broker_status = BROKERS.command(
    "brokerStatus",
    "Fetch broker runtime status data",
    (BROKER_ADDRESS, cluster_name("which cluster")),
    text=lambda statuses, a: broker_text.broker_status(statuses, by_cluster=not a.broker_addr),
    check=broker_or_cluster,
    namesrv=without_broker,
)

broker_member_group = BROKERS.command(
    "getBrokerMemberGroup",
    "Fetch the live members of a broker group (SlaveActingMaster: who acts as master).",
    (
        required("cluster_name", "--clusterName", "-c", "cluster name"),
        required("broker_name", "--brokerName", "-b", "broker name"),
    ),
    operation="broker_member_group",
)


def _broker_name_or_cluster(args: Args) -> None:
    """mqadmin prints its help without -b or -c; rmq says what is missing."""
    if not args.broker_name and not args.cluster_name:
        raise UsageError("one of -b/--brokerName or -c/--clusterName is required")


get_broker_epoch = BROKERS.command(
    "getBrokerEpoch",
    "Fetch broker epoch entries",
    (
        cluster_name("which cluster"),
        opt("broker_name", "--brokerName", "-b", "which broker to fetch"),
        opt("interval", "--interval", "-i", "the interval(second) of get info", int),
        ROUNDS,
    ),
    params=("broker_name", "cluster_name"),
    check=_broker_name_or_cluster,
    repeat=lambda a: (a.interval, a.rounds),
)

ha_status = BROKERS.command(
    "haStatus",
    "Fetch ha runtime status data.",
    (
        broker_addr("which broker to fetch"),
        cluster_name("which cluster"),
        opt("interval", "--interval", "-i", "the interval(second) of get info", int),
        ROUNDS,
    ),
    params=("broker_addr", "cluster_name"),
    check=broker_or_cluster,
    namesrv=without_broker,
    repeat=lambda a: (a.interval, a.rounds),
)

get_broker_config = BROKERS.command(
    "getBrokerConfig",
    "Get broker config by cluster or special broker!",
    UPDATE_WHICH,
    namesrv=without_broker,
)

update_broker_config = BROKERS.command(
    "updateBrokerConfig",
    "Update broker's config",
    (CONFIG_KEY, CONFIG_VALUE, *UPDATE_WHICH),
    check=broker_or_cluster,
    namesrv=without_broker,
)


BROKER_NAME = required("broker_name", "--brokerName", "-b", "broker name")


def _write_perm(name: str, description: str, verb: str) -> AdminCommand:
    """wipeWritePerm, addWritePerm: one line per name server, then fail for the first that did not."""
    return BROKERS.command(
        name,
        description,
        (BROKER_NAME,),
        group="namesrv",
        operation=f"{verb}_write_perm",
        text=lambda results, a: broker_text.write_perm(results, a.broker_name.strip(), verb),
        fail=lambda results: fail_first([r for r in results if not r.ok]),
    )


wipe_write_perm = _write_perm(
    "wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param", "wipe"
)
add_write_perm = _write_perm(
    "addWritePerm", "Add write perm of broker in all name server you defined in the -n param", "add"
)

get_namesrv_config = BROKERS.command(
    "getNamesrvConfig",
    "Get configs of name server.",
    (),
    group="namesrv",
    data=lambda configs, a: {addr: dict(pairs) for addr, pairs in configs.items()},
)

update_namesrv_config = BROKERS.command(
    "updateNamesrvConfig",
    "Update configs of name server.",
    (CONFIG_KEY, CONFIG_VALUE),
    group="namesrv",
    text=lambda addrs, a: broker_text.update_namesrv_config(
        addrs if a.namesrv else None, a.key.strip(), a.value.strip()
    ),
    data=lambda addrs, a: {"namesrv": addrs, "key": a.key.strip(), "value": a.value.strip()},
)

NAMESPACE = required("namespace", "--namespace", "-s", "set the namespace")
KV_KEY = required("key", "--key", "-k", "set the key name")


def _kv_config(name: str, description: str, options: tuple[Opt, ...], done: str) -> AdminCommand:
    """updateKvConfig, deleteKvConfig: a change of every name server's KV config, mqadmin's line
    ``done`` once they all applied it; ``--json`` names the name servers."""
    return BROKERS.command(
        name,
        description,
        options,
        group="namesrv",
        text=lambda addrs, a: done,
        data=lambda addrs, a: {"namesrv": addrs},
    )


update_kv_config = _kv_config(
    "updateKvConfig",
    "Create or update KV config.",
    (NAMESPACE, KV_KEY, required("value", "--value", "-v", "set the key value")),
    "create or update kv config to namespace success.\n",
)
delete_kv_config = _kv_config(
    "deleteKvConfig", "Delete KV config.", (NAMESPACE, KV_KEY), "delete kv config from namespace success.\n"
)


def _clean(name: str, description: str, operation: str) -> AdminCommand:
    """cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic: ``success`` or ``false`` (no
    newline after ``success``, as mqadmin prints it) from every broker of ``-b`` or ``-c``."""

    def fail(result: Any) -> None:
        if not result.ok:
            failed(result.errors[0], result.error_kind)

    return BROKERS.command(
        name,
        description,
        (BROKER_ADDRESS, opt("cluster", "--cluster", "-c", "cluster name")),
        operation=operation,
        text=lambda result, a: "success" if result.ok else "false\n",
        fail=fail,
        namesrv=without_broker,
    )


clean_expired_cq = _clean("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", "clean_expired_cq")
delete_expired_commit_log = _clean(
    "deleteExpiredCommitLog", "Delete expired CommitLog files", "delete_expired_commitlog"
)
clean_unused_topic = _clean("cleanUnusedTopic", "Clean unused topic on broker.", "clean_unused_topic")
