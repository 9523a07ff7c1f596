"""mqadmin cluster, broker and name server commands (PROTOCOL.md C.2, C.4.1, C.4.7)."""

from typing import Annotated

import typer

from rmqcli.cli.admin_common import (
    ClusterOpt,
    JsonOpt,
    NamesrvOpt,
    emit_json,
    session,
    write,
)
from rmqcli.errors import BrokerError, NetworkError, UsageError


def fail(message: str | None, kind: str | None) -> None:
    """Exit non-zero after the output: 5 for an unreachable broker, 6 for an error response."""
    raise (NetworkError if kind == "network" else BrokerError)(message or "failed")


def cluster_list(
    more_stats: Annotated[bool, typer.Option("--moreStats", "-m", help="Print more stats")] = False,
    interval: Annotated[
        int | None, typer.Option("--interval", "-i", help="specify intervals numbers, it is in seconds")
    ] = None,
    rounds: Annotated[
        int, typer.Option("--rounds", help="With -i: stop after this many rounds (0: run until interrupted).")
    ] = 0,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List all of clusters"""
    import time

    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    done = 0
    with session(namesrv) as s:
        while True:
            rows = ops.cluster_list(s)
            if json_out:
                emit_json(rows)
            else:
                write(fmt.cluster_list_more(rows) if more_stats else fmt.cluster_list(rows))
            failed = [r for r in rows if r.error]
            if failed:
                fail(failed[0].error, failed[0].error_kind)
            done += 1
            if not interval or interval <= 0 or (rounds and done >= rounds):
                return
            time.sleep(interval)


def broker_status(
    broker_addr: Annotated[str | None, typer.Option("--brokerAddr", "-b", help="Broker address")] = None,
    cluster_name: Annotated[str | None, typer.Option("--clusterName", "-c", help="which cluster")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Fetch broker runtime status data"""
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv, need_namesrv=not broker_addr) as s:
        statuses = ops.broker_status(s, broker_addr, cluster_name)
    emit_json(statuses) if json_out else write(fmt.broker_status(statuses, by_cluster=not broker_addr))


def get_broker_config(
    broker_addr: Annotated[str | None, typer.Option("--brokerAddr", "-b", help="update which broker")] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="update which cluster")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Get broker config by cluster or special broker!"""
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv, need_namesrv=not broker_addr) as s:
        configs = ops.get_broker_config(s, broker_addr, cluster_name)
    emit_json(configs) if json_out else write(fmt.broker_config(configs))


def update_broker_config(
    key: Annotated[str, typer.Option("--key", "-k", help="config key")],
    value: Annotated[str, typer.Option("--value", "-v", help="config value")],
    broker_addr: Annotated[str | None, typer.Option("--brokerAddr", "-b", help="update which broker")] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="update which cluster")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update broker's config"""
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv, need_namesrv=not broker_addr) as s:
        addrs = ops.update_broker_config(s, key, value, broker_addr, cluster_name)
    emit_json(addrs) if json_out else write(fmt.update_broker_config(addrs))


BrokerNameOpt = Annotated[str, typer.Option("--brokerName", "-b", help="broker name")]


def _write_perm(broker_name: str, namesrv: str | None, json_out: bool, wipe: bool) -> None:
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        results = ops.wipe_write_perm(s, broker_name) if wipe else ops.add_write_perm(s, broker_name)
    emit_json(results) if json_out else write(
        fmt.write_perm(results, broker_name.strip(), "wipe" if wipe else "add")
    )
    failed = [r for r in results if not r.ok]
    if failed:
        fail(failed[0].error, failed[0].error_kind)


def wipe_write_perm(
    broker_name: BrokerNameOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False
) -> None:
    """Wipe write perm of broker in all name server you defined in the -n param"""
    _write_perm(broker_name, namesrv, json_out, wipe=True)


def add_write_perm(broker_name: BrokerNameOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False) -> None:
    """Add write perm of broker in all name server you defined in the -n param"""
    _write_perm(broker_name, namesrv, json_out, wipe=False)


def get_namesrv_config(namesrv: NamesrvOpt = None, json_out: JsonOpt = False) -> None:
    """Get configs of name server."""
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        configs = ops.get_namesrv_config(s)
    emit_json({a: dict(p) for a, p in configs.items()}) if json_out else write(fmt.namesrv_config(configs))


KeyOpt = Annotated[str, typer.Option("--key", "-k", help="config key")]
ValueOpt = Annotated[str, typer.Option("--value", "-v", help="config value")]


def update_namesrv_config(
    key: KeyOpt, value: ValueOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False
) -> None:
    """Update configs of name server."""
    from rmqcli.admin import broker as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        addrs = ops.update_namesrv_config(s, key, value)
    if json_out:
        emit_json({"namesrv": addrs, "key": key.strip(), "value": value.strip()})
    else:
        write(fmt.update_namesrv_config(addrs if namesrv else None, key.strip(), value.strip()))


NamespaceOpt = Annotated[str, typer.Option("--namespace", "-s", help="set the namespace")]


def update_kv_config(
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("--key", "-k", help="set the key name")],
    value: Annotated[str, typer.Option("--value", "-v", help="set the key value")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create or update KV config."""
    from rmqcli.admin import broker as ops

    with session(namesrv) as s:
        addrs = ops.update_kv_config(s, namespace, key, value)
    emit_json({"namesrv": addrs}) if json_out else write("create or update kv config to namespace success.\n")


def delete_kv_config(
    namespace: NamespaceOpt,
    key: Annotated[str, typer.Option("--key", "-k", help="set the key name")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete KV config."""
    from rmqcli.admin import broker as ops

    with session(namesrv) as s:
        addrs = ops.delete_kv_config(s, namespace, key)
    emit_json({"namesrv": addrs}) if json_out else write("delete kv config from namespace success.\n")


def _clean(
    which: str, broker_addr: str | None, cluster: str | None, namesrv: str | None, json_out: bool
) -> None:
    from rmqcli.admin import broker as ops

    operation = {
        "cq": ops.clean_expired_cq,
        "commitlog": ops.delete_expired_commitlog,
        "topic": ops.clean_unused_topic,
    }[which]
    with session(namesrv, need_namesrv=not broker_addr) as s:
        result = operation(s, broker_addr, cluster)
    emit_json(result) if json_out else write("success" if result.ok else "false")
    if not result.ok:
        if not json_out:
            write("\n")
        fail(result.errors[0], result.error_kind)


CleanBrokerOpt = Annotated[str | None, typer.Option("--brokerAddr", "-b", help="Broker address")]


def clean_expired_cq(
    broker_addr: CleanBrokerOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Clean expired ConsumeQueue on broker."""
    _clean("cq", broker_addr, cluster, namesrv, json_out)


def delete_expired_commit_log(
    broker_addr: CleanBrokerOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete expired CommitLog files"""
    _clean("commitlog", broker_addr, cluster, namesrv, json_out)


def clean_unused_topic(
    broker_addr: CleanBrokerOpt = None,
    cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Clean unused topic on broker."""
    _clean("topic", broker_addr, cluster, namesrv, json_out)
