"""The ACL requests of ``AdminBrokerProcessor`` (4.9.x) and GET_BROKER_CLUSTER_ACL_CONFIG (54).

* UPDATE_AND_CREATE_ACL_CONFIG (50): one account from the header (``accessKey``, ``secretKey``,
  ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``, and
  ``topicPerms``/``groupPerms`` as ``a=PUB,b=SUB``); failure: 209 with the reason.
* DELETE_ACL_CONFIG (51): ``accessKey``; failure: 210.
* GET_BROKER_CLUSTER_ACL_INFO (52): header ``version`` (the default file's dataVersion),
  ``allAclFileVersion`` (file -> dataVersion), ``brokerName``, ``brokerAddr``, ``clusterName``.
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``globalWhiteAddrs`` (comma-separated) and
  ``aclFileFullPath`` (one of the broker's ACL files; missing: the default file); failure: 211.
* GET_BROKER_CLUSTER_ACL_CONFIG (54, 4.5-4.7's request; 4.9.8 no longer answers it): body
  ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [...]}``.

Every file change is written beside and renamed into place. On a broker without ``aclEnable`` the
requests fail with the same codes, saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqcli.broker.acl.addresses import AclConfigError
from rmqcli.broker.acl.plainacl import PlainAclFiles
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Connection, Reply

DISABLED = "ACL is not enabled on this broker (aclEnable=false in broker.conf)"


def _split(text: str | None) -> list[str] | None:
    """``UtilAll.split(text, ",")``: None stays None."""
    if text is None:
        return None
    return [part for part in text.split(",") if part.strip()]


def _acl_change(
    ctl: BrokerContext,
    req: RemotingCommand,
    failed: int,
    field: str,
    change: Callable[[PlainAclFiles, str], str | None],
    prefix: str = "",
) -> Reply:
    """The shape of 50, 51 and 53: ACL enabled, the required header ``field`` (``@CFNotNull``),
    then ``change``; a refusal or a failed write answers ``failed`` (``prefix`` may name ``{value}``)."""
    if ctl.acl is None:
        return req.response(failed, DISABLED)
    value = req.ext_fields.get(field)
    if value is None:
        return req.response(ResponseCode.SYSTEM_ERROR, f"the custom field <{field}> is null")
    try:
        problem = change(ctl.acl.files, value)
    except (AclConfigError, OSError) as exc:
        return req.response(failed, prefix.format(value=value) + str(exc))
    return req.response() if problem is None else req.response(failed, problem)


def update_acl_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    f = req.ext_fields

    def change(files: PlainAclFiles, access: str) -> None:
        files.update_account(
            {
                "accessKey": access,
                "secretKey": f.get("secretKey"),
                "whiteRemoteAddress": f.get("whiteRemoteAddress"),
                "admin": (f.get("admin") or "").strip().lower() == "true",
                "defaultTopicPerm": f.get("defaultTopicPerm"),
                "defaultGroupPerm": f.get("defaultGroupPerm"),
                "topicPerms": _split(f.get("topicPerms")),
                "groupPerms": _split(f.get("groupPerms")),
            }
        )

    return _acl_change(ctl, req, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, "accessKey", change)


def delete_acl_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    def change(files: PlainAclFiles, access: str) -> str | None:
        if files.delete_account(access):
            return None
        return f"The accesskey[{access}] corresponding to accessConfig has been deleted failed."

    return _acl_change(ctl, req, ResponseCode.DELETE_ACL_CONFIG_FAILED, "accessKey", change)


def update_global_white_addrs(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    def change(files: PlainAclFiles, addresses: str) -> None:
        files.update_global_white(_split(addresses) or [], req.ext_fields.get("aclFileFullPath"))

    failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    prefix = "The globalWhiteAddresses[{value}] has been updated failed. "
    return _acl_change(ctl, req, failed, "globalWhiteAddrs", change, prefix)


def get_acl_info(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if ctl.acl is None:
        return req.response(ResponseCode.SYSTEM_ERROR, DISABLED)
    files = ctl.acl.files
    versions = {str(path): v.as_json() for path, v in files.versions.items()}
    header = {
        "version": json.dumps(files.default_version().as_json(), separators=(",", ":")),
        "allAclFileVersion": json.dumps(versions, separators=(",", ":")),
        "brokerName": ctl.config.broker_name,
        "brokerAddr": ctl.addr,
        "clusterName": ctl.config.broker_cluster_name,
    }
    return req.response(header=header)


def get_acl_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if ctl.acl is None:
        return req.response(ResponseCode.SYSTEM_ERROR, DISABLED)
    try:
        body = json.dumps(ctl.acl.files.all_config(), separators=(",", ":")).encode()
    except AclConfigError as exc:
        return req.response(ResponseCode.SYSTEM_ERROR, str(exc))
    return req.response(body=body)


HANDLERS = {
    RC.UPDATE_AND_CREATE_ACL_CONFIG: update_acl_config,
    RC.DELETE_ACL_CONFIG: delete_acl_config,
    RC.GET_BROKER_CLUSTER_ACL_INFO: get_acl_info,
    RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: update_global_white_addrs,
    RC.GET_BROKER_CLUSTER_ACL_CONFIG: get_acl_config,
}
