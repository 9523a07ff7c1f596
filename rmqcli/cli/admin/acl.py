"""mqadmin's ACL commands (4.9.8 ``tools.command.acl``): updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion; names, flags and output as mqadmin's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqcli.cli.admin.registry import (
    AdminCommand,
    Args,
    Lazy,
    Opt,
    broker_addr,
    broker_or_cluster_options,
    cluster_name,
    fail_first,
    opt,
    parse_boolean,
    required,
    without_broker,
)

acl = Lazy("rmqcli.admin.acl")
acl_text = Lazy("rmqcli.cli.admin.format")


def _targets(s: Any, a: Args, *, masters: bool = False) -> list[str]:
    return acl.targets(s, a.broker_addr, a.cluster_name, masters=masters)


def _strip(text: str | None) -> str | None:
    return text.strip() if text is not None else None


def _split(text: str | None) -> list[str] | None:
    return text.strip().split(",") if text is not None else None


def _change(
    name: str,
    description: str,
    options: tuple[Opt, ...],
    call: Callable[[Any, Args], Any],
    line: str,
    tail: Callable[[Any, Args], str] | None = None,
) -> AdminCommand:
    """A change sent to every broker of ``-b`` or ``-c``: ``line % addr`` for each that applied it
    (then ``tail``), and the exit code of the first that did not."""
    return AdminCommand(
        name,
        description,
        "acl",
        options,
        call=call,
        text=lambda result, a: acl_text.acl_done(result, line, tail(result, a) if tail else ""),
        fail=lambda result: fail_first(result.failed),
        namesrv=without_broker,
    )


update_acl_config = _change(
    "updateAclConfig",
    "Update acl config yaml file in broker",
    (
        required("access_key", "--accessKey", "-a", "set accessKey in acl config file"),
        required("secret_key", "--secretKey", "-s", "set secretKey in acl config file"),
        *broker_or_cluster_options("update acl config file to"),
        opt(
            "white_remote_address",
            "--whiteRemoteAddress",
            "-w",
            "set white ip Address for account in acl config file",
        ),
        opt("default_topic_perm", "--defaultTopicPerm", "-i", "set default topicPerm in acl config file"),
        opt("default_group_perm", "--defaultGroupPerm", "-u", "set default GroupPerm in acl config file"),
        opt("topic_perms", "--topicPerms", "-t", "set topicPerms list,eg: topicA=DENY,topicD=SUB"),
        opt("group_perms", "--groupPerms", "-g", "set groupPerms list,eg: groupD=DENY,groupD=SUB"),
        opt("admin", "--admin", "-m", "set admin flag in acl config file"),
    ),
    lambda s, a: acl.update_acl_config(
        s,
        _targets(s, a),
        access_key=a.access_key.strip(),
        secret_key=a.secret_key.strip(),
        white_remote_address=_strip(a.white_remote_address),
        default_topic_perm=_strip(a.default_topic_perm),
        default_group_perm=_strip(a.default_group_perm),
        topic_perms=_split(a.topic_perms),
        group_perms=_split(a.group_perms),
        admin=parse_boolean(a.admin),
    ),
    "create or update plain access config to %s success.",
)

delete_acl_config = _change(
    "deleteAclConfig",
    "Delete Acl Config Account in broker",
    (
        required(
            "access_key", "--accessKey", "-a", "set accessKey in acl config file for deleting which account"
        ),
        *broker_or_cluster_options("delete acl config account from"),
    ),
    lambda s, a: acl.delete_acl_config(s, _targets(s, a), a.access_key.strip()),
    "delete plain access config account from %s success.",
    lambda result, a: f"account's accesskey is:{a.access_key.strip()}\n" if not result.failed else "",
)

update_global_white_addr = _change(
    "updateGlobalWhiteAddr",
    "Update global white address for acl Config File in broker",
    (
        required(
            "addresses",
            "--globalWhiteRemoteAddresses",
            "-g",
            "set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*",
        ),
        *broker_or_cluster_options("update global white address to"),
        opt(
            "acl_file",
            "--aclFileFullPath",
            "-p",
            "update global white address of specified acl file,eg: /xxx/plain_test.yml",
        ),
    ),
    lambda s, a: acl.update_global_white_addr(s, _targets(s, a), a.addresses.strip(), _strip(a.acl_file)),
    "update global white remote addresses to %s success.",
)

cluster_acl_config_version = AdminCommand(
    "clusterAclConfigVersion",
    "List all of acl config version information in cluster",
    "acl",
    (
        broker_addr("query acl config version for which broker"),
        cluster_name("query acl config version for specified cluster"),
    ),
    call=lambda s, a: acl.acl_config_versions(s, _targets(s, a, masters=True)),
    text=lambda result, a: acl_text.acl_versions(result, by_broker=bool(a.broker_addr)),
    fail=lambda result: fail_first([b for b in result.brokers if not b.ok]),
    namesrv=without_broker,
)
