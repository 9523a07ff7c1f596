"""mqadmin's ACL commands (4.9.8 ``tools.command.acl``): names, flags and output as mqadmin's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from rmqcli.cli.admin_common import JsonOpt, NamesrvOpt, emit_json, session, write
from rmqcli.errors import BrokerError, NetworkError

if TYPE_CHECKING:
    from rmqcli.admin.acl import AclUpdateResult, BrokerOutcome


def _broker_opt(text: str) -> object:
    return typer.Option("--brokerAddr", "-b", help=text)


def _cluster_opt(text: str) -> object:
    return typer.Option("--clusterName", "-c", help=text)


def _fail_if_any(failed: list[BrokerOutcome]) -> None:
    """Exit 5 for an unreachable broker, else 6 for an error answer, after the output."""
    if failed:
        first = failed[0]
        raise (NetworkError if first.error_kind == "network" else BrokerError)(first.error or "failed")


def _report(result: AclUpdateResult, json_out: bool, line: str, tail: str = "") -> None:
    if json_out:
        emit_json(result)
    else:
        write("".join(line % b.addr + "\n" for b in result.brokers if b.ok) + tail)
    _fail_if_any(result.failed)


def update_acl_config(
    access_key: Annotated[str, typer.Option("--accessKey", "-a", help="set accessKey in acl config file")],
    secret_key: Annotated[str, typer.Option("--secretKey", "-s", help="set secretKey in acl config file")],
    broker_addr: Annotated[str | None, _broker_opt("update acl config file to which broker")] = None,
    cluster: Annotated[str | None, _cluster_opt("update acl config file to which cluster")] = None,
    white_remote_address: Annotated[
        str | None,
        typer.Option(
            "--whiteRemoteAddress", "-w", help="set white ip Address for account in acl config file"
        ),
    ] = None,
    default_topic_perm: Annotated[
        str | None, typer.Option("--defaultTopicPerm", "-i", help="set default topicPerm in acl config file")
    ] = None,
    default_group_perm: Annotated[
        str | None, typer.Option("--defaultGroupPerm", "-u", help="set default GroupPerm in acl config file")
    ] = None,
    topic_perms: Annotated[
        str | None, typer.Option("--topicPerms", "-t", help="set topicPerms list,eg: topicA=DENY,topicD=SUB")
    ] = None,
    group_perms: Annotated[
        str | None, typer.Option("--groupPerms", "-g", help="set groupPerms list,eg: groupD=DENY,groupD=SUB")
    ] = None,
    admin: Annotated[
        str | None, typer.Option("--admin", "-m", help="set admin flag in acl config file")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update acl config yaml file in broker"""
    from rmqcli.admin import acl as ops
    from rmqcli.cli.admin_common import java_bool

    with session(namesrv, need_namesrv=not broker_addr) as s:
        addrs = ops.targets(s, broker_addr, cluster, masters=False)
        result = ops.update_acl_config(
            s,
            addrs,
            access_key=access_key.strip(),
            secret_key=secret_key.strip(),
            white_remote_address=white_remote_address.strip() if white_remote_address is not None else None,
            default_topic_perm=default_topic_perm.strip() if default_topic_perm is not None else None,
            default_group_perm=default_group_perm.strip() if default_group_perm is not None else None,
            topic_perms=topic_perms.strip().split(",") if topic_perms is not None else None,
            group_perms=group_perms.strip().split(",") if group_perms is not None else None,
            admin=java_bool(admin),
        )
    _report(result, json_out, "create or update plain access config to %s success.")


def delete_acl_config(
    access_key: Annotated[
        str,
        typer.Option("--accessKey", "-a", help="set accessKey in acl config file for deleting which account"),
    ],
    broker_addr: Annotated[str | None, _broker_opt("delete acl config account from which broker")] = None,
    cluster: Annotated[str | None, _cluster_opt("delete acl config account from which cluster")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete Acl Config Account in broker"""
    from rmqcli.admin import acl as ops

    with session(namesrv, need_namesrv=not broker_addr) as s:
        addrs = ops.targets(s, broker_addr, cluster, masters=False)
        result = ops.delete_acl_config(s, addrs, access_key.strip())
    tail = f"account's accesskey is:{access_key.strip()}\n" if not result.failed else ""
    _report(result, json_out, "delete plain access config account from %s success.", tail)


def update_global_white_addr(
    addresses: Annotated[
        str,
        typer.Option(
            "--globalWhiteRemoteAddresses",
            "-g",
            help="set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*",
        ),
    ],
    broker_addr: Annotated[str | None, _broker_opt("update global white address to which broker")] = None,
    cluster: Annotated[str | None, _cluster_opt("update global white address to which cluster")] = None,
    acl_file: Annotated[
        str | None,
        typer.Option(
            "--aclFileFullPath",
            "-p",
            help="update global white address of specified acl file,eg: /xxx/plain_test.yml",
        ),
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update global white address for acl Config File in broker"""
    from rmqcli.admin import acl as ops

    with session(namesrv, need_namesrv=not broker_addr) as s:
        addrs = ops.targets(s, broker_addr, cluster, masters=False)
        result = ops.update_global_white_addr(
            s, addrs, addresses.strip(), acl_file.strip() if acl_file is not None else None
        )
    _report(result, json_out, "update global white remote addresses to %s success.")


VERSION_ROW = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n"


def cluster_acl_config_version(
    broker_addr: Annotated[str | None, _broker_opt("query acl config version for which broker")] = None,
    cluster: Annotated[str | None, _cluster_opt("query acl config version for specified cluster")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List all of acl config version information in cluster"""
    import time

    from rmqcli.admin import acl as ops

    with session(namesrv, need_namesrv=not broker_addr) as s:
        addrs = ops.targets(s, broker_addr, cluster, masters=True)
        result = ops.acl_config_versions(s, addrs)
    if json_out:
        emit_json(result)
    else:
        out = []
        if not broker_addr:
            out.append(
                VERSION_ROW
                % (
                    "#Cluster Name",
                    "#Broker Name",
                    "#Broker Addr",
                    "#AclFilePath",
                    "#AclConfigVersionNum",
                    "#AclLastUpdateTime",
                )  # fmt: skip
            )
        for v in result.versions:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.timestamp / 1000))
            row = (v.cluster_name, v.broker_name, v.broker_addr, v.acl_file_path, str(v.counter), stamp)
            out.append(VERSION_ROW % row)
        if not [b for b in result.brokers if not b.ok]:
            kind = "broker's" if broker_addr else "cluster's"
            out.append(f"get {kind} plain access config version success.\n")
        write("".join(out))
    _fail_if_any([b for b in result.brokers if not b.ok])
