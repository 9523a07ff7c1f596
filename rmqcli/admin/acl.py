"""mqadmin's ACL commands as operations (4.9.8 ``tools.command.acl``, ``MQClientAPIImpl``).

``-b`` names one broker; ``-c`` a cluster: every broker of it (masters and slaves) for the
updates, the masters for ``clusterAclConfigVersion``. Each broker's outcome is kept, so one
unreachable broker does not hide the others' answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqcli.errors import RmqError, UsageError
from rmqcli.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqcli.admin.session import AdminSession
    from rmqcli.remoting.headers import CommandHeader


@dataclass
class BrokerOutcome:
    addr: str
    ok: bool
    error: str | None = None
    error_kind: str | None = None  # "network" or "broker"


@dataclass
class AclUpdateResult:
    """What an update did on each broker."""

    brokers: list[BrokerOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[BrokerOutcome]:
        return [b for b in self.brokers if not b.ok]


@dataclass
class AclFileVersion:
    cluster_name: str
    broker_name: str
    broker_addr: str
    acl_file_path: str
    counter: int
    timestamp: int


@dataclass
class AclVersionResult:
    versions: list[AclFileVersion] = field(default_factory=list)
    brokers: list[BrokerOutcome] = field(default_factory=list)


def targets(
    session: AdminSession, broker_addr: str | None, cluster: str | None, *, masters: bool
) -> list[str]:
    """``-b`` or the brokers of ``-c`` (``CommandUtil.fetchMaster[AndSlave]AddrByClusterName``)."""
    if broker_addr and broker_addr.strip():
        return [broker_addr.strip()]
    if not cluster or not cluster.strip():
        raise UsageError("give -b/--brokerAddr or -c/--clusterName")
    name = cluster.strip()
    return session.master_addrs_of_cluster(name) if masters else session.all_addrs_of_cluster(name)


def _each(session: AdminSession, addrs: list[str], code: int, header: CommandHeader) -> AclUpdateResult:
    from rmqcli.admin.broker import error_kind

    result = AclUpdateResult()
    for addr, response in zip(addrs, session.call_each(addrs, code, header), strict=True):
        if isinstance(response, RmqError):
            result.brokers.append(BrokerOutcome(addr, False, str(response), error_kind(response)))
        else:
            result.brokers.append(BrokerOutcome(addr, True))
    return result


def update_acl_config(
    session: AdminSession,
    addrs: list[str],
    *,
    access_key: str,
    secret_key: str,
    white_remote_address: str | None = None,
    default_topic_perm: str | None = None,
    default_group_perm: str | None = None,
    topic_perms: list[str] | None = None,
    group_perms: list[str] | None = None,
    admin: bool = False,
) -> AclUpdateResult:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): ``CreateAccessConfigRequestHeader``."""
    from rmqcli.remoting import headers as hd

    header = hd.CreateAccessConfigRequestHeader(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=white_remote_address,
        admin=admin,
        default_topic_perm=default_topic_perm,
        default_group_perm=default_group_perm,
        topic_perms=",".join(topic_perms) if topic_perms is not None else None,
        group_perms=",".join(group_perms) if group_perms is not None else None,
    )
    return _each(session, addrs, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)


def delete_acl_config(session: AdminSession, addrs: list[str], access_key: str) -> AclUpdateResult:
    """DELETE_ACL_CONFIG (51)."""
    from rmqcli.remoting import headers as hd

    header = hd.DeleteAccessConfigRequestHeader(access_key=access_key)
    return _each(session, addrs, RequestCode.DELETE_ACL_CONFIG, header)


def update_global_white_addr(
    session: AdminSession, addrs: list[str], addresses: str, acl_file: str | None
) -> AclUpdateResult:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``globalWhiteAddrs`` and ``aclFileFullPath``."""
    from rmqcli.remoting import headers as hd

    header = hd.UpdateGlobalWhiteAddrsConfigRequestHeader(
        global_white_addrs=addresses, acl_file_full_path=acl_file
    )
    return _each(session, addrs, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)


def acl_config_versions(session: AdminSession, addrs: list[str]) -> AclVersionResult:
    """GET_BROKER_CLUSTER_ACL_INFO (52) of each broker: one row per ACL file."""
    from rmqcli.admin.broker import error_kind

    result = AclVersionResult()
    answers = session.call_each(addrs, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
    for addr, response in zip(addrs, answers, strict=True):
        try:
            if isinstance(response, RmqError):
                raise response
            fields = response.ext_fields
            try:
                table = json.loads(fields.get("allAclFileVersion") or "{}")
            except ValueError:
                raise RmqError(f"{addr}: allAclFileVersion is not JSON") from None
            for path, version in (table if isinstance(table, dict) else {}).items():
                version = version if isinstance(version, dict) else {}
                result.versions.append(
                    AclFileVersion(
                        cluster_name=fields.get("clusterName", ""),
                        broker_name=fields.get("brokerName", ""),
                        broker_addr=fields.get("brokerAddr", addr),
                        acl_file_path=str(path),
                        counter=int(version.get("counter", 0)),
                        timestamp=int(version.get("timestamp", 0)),
                    )
                )
            result.brokers.append(BrokerOutcome(addr, True))
        except (RmqError, TypeError, ValueError) as exc:
            kind = error_kind(exc) if isinstance(exc, RmqError) else "broker"
            result.brokers.append(BrokerOutcome(addr, False, str(exc), kind))
    return result
