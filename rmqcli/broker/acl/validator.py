"""Checking one request against the plain ACL (``PlainAccessValidator``, ``PlainPermissionManager.
validate`` and ``checkPerm`` of 4.9.x), in 4.9.8's order:

1. a remote address in a global white list passes;
2. no ``AccessKey``: refused; an unknown one: refused;
3. an address in the account's own white list passes;
4. the ``Signature`` must be the HmacSHA1 of the request's sorted ext fields and body;
5. a send to RMQ_SYS_TRACE_TOPIC passes; codes in ``ADMIN_CODES`` need ``admin: true``, and so
   does a system topic holding other topics' messages (rmq's own: ``ownership``);
6. each resource the request names needs its permission: the account's entry for it, else the
   account's default for topics or groups (an admin account without entries passes). The
   resources are 4.9.8's (``permissions``), rmq's additions (``ownership``) and, for a request
   naming a stored message by offset, that message's topic (``messages``).

A refusal answers NO_PERMISSION (16) with the ``AclException`` message as remark. (4.9.8 itself
answers SYSTEM_ERROR (1) with the same message and a stack frame: its RPC hook throws.)

Steps 1 to 4 and the per-resource check are shared with the gRPC endpoint (``grpcacl``), whose
signature and checker follow 5.1.1.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping

from formats.names import TRACE_TOPIC
from rmqcli.broker.acl.messages import Lookup, message_resources
from rmqcli.broker.acl.ownership import Names, admin_topic, extra_resources
from rmqcli.broker.acl.permissions import (
    ADMIN_CODES,
    PUB,
    check_permission,
    describe,
    is_group_resource,
    needed_resources,
)
from rmqcli.broker.acl.plainacl import Account, PlainAclFiles
from rmqcli.remoting.acl import ACCESS_KEY, SIGNATURE, calc_signature, signed_content
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

REMARK_PREFIX = "org.apache.rocketmq.acl.common.AclException: "


class AccessDenied(Exception):
    """A request the ACL refuses; the message is 4.9.x's ``AclException`` text."""


def authenticate(
    files: PlainAclFiles,
    remote_host: str,
    access_key: str | None,
    content: Callable[[], bytes],
    signature: str | None,
) -> Account | None:
    """Steps 1 to 4: None when a white list lets the request through, else the account whose
    secret signs ``content()`` into ``signature`` (Base64 HmacSHA1, ``AclUtils.calSignature``)."""
    if any(match(remote_host) for match in files.global_white):
        return None
    if access_key is None:
        raise AccessDenied("No accessKey is configured")
    account = files.accounts.get(access_key)
    if account is None:
        raise AccessDenied(f"No acl config for {access_key}")
    if account.matcher(remote_host):
        return None
    if not signature_matches(content(), account.secret_key, signature):
        raise AccessDenied(f"Check signature failed for accessKey={access_key}")
    return account


def signature_matches(content: bytes, secret_key: str, signature: str | None) -> bool:
    """``signature`` is the Base64 HmacSHA1 of ``content`` with ``secret_key`` (``AclUtils.calSignature``)."""
    expected = calc_signature(content, secret_key)
    return hmac.compare_digest(expected.encode(), (signature or "").encode())


def check_resources(
    account: Account, needed: Mapping[str, int], listed: str = "No default permission"
) -> None:
    """Each resource against the account's entry for it, else its topic or group default.
    ``listed`` starts the message of a refusal by an entry (4.9.8 says "No default permission"
    for both, 5.1.1's ``PlainPermissionChecker`` "No permission" for an entry)."""
    for resource, perm in needed.items():
        group = is_group_resource(resource)
        owned = account.perms.get(resource)
        if owned is None:
            owned = account.default_group_perm if group else account.default_topic_perm
            if not check_permission(perm, owned):
                raise AccessDenied(f"No default permission for {describe(resource)}")
        elif not check_permission(perm, owned):
            raise AccessDenied(f"{listed} for {describe(resource)}")


def traced(needed: Mapping[str, int]) -> bool:
    """A send to RMQ_SYS_TRACE_TOPIC, which needs no permission."""
    return needed.get(TRACE_TOPIC) == PUB


class PlainAccessValidator:
    def __init__(self, files: PlainAclFiles):
        self.files = files

    def validate(
        self,
        request: RemotingCommand,
        remote_host: str,
        look: Lookup | None = None,
        names: Names | None = None,
    ) -> None:
        """Raise ``AccessDenied`` unless ``request`` from ``remote_host`` may run; ``look`` finds
        the stored message a request names by offset; ``names`` (the broker's groups; None: every
        reading) tell a POP retry topic's group and topic apart."""
        fields = request.ext_fields
        needed: dict[str, int] = {}
        if fields:
            try:
                needed = needed_resources(request)
            except Exception as exc:  # parse(): a header or body it cannot read
                raise AccessDenied(str(exc) or type(exc).__name__) from None
        trace = traced(needed)  # 4.9.8's resources only: a send to RMQ_SYS_TRACE_TOPIC itself
        access_key = fields.get(ACCESS_KEY)
        account = authenticate(
            self.files,
            remote_host,
            access_key,
            lambda: signed_content(fields, request.body),
            fields.get(SIGNATURE),
        )
        if account is None or trace:
            return
        if fields:
            for resource, perm in extra_resources(request, names, admin=account.admin).items():
                needed.setdefault(resource, perm)
        stored = message_resources(request, look, names) if look is not None else {}
        if not account.admin:
            held = admin_topic(needed) or admin_topic(stored)
            if request.code in ADMIN_CODES or held is not None:
                what = f"request code={request.code}" if held is None else f"topic:{held}"
                raise AccessDenied(f"Need admin permission for {what}, but accessKey={access_key} is not")
        if not account.has_perms and account.admin:
            return
        check_resources(account, needed)
        check_resources(account, stored)

    def refusal(
        self,
        request: RemotingCommand,
        remote_host: str,
        look: Lookup | None = None,
        names: Names | None = None,
    ) -> RemotingCommand | None:
        """None when the request may run, else its NO_PERMISSION answer."""
        try:
            self.validate(request, remote_host, look, names)
        except AccessDenied as exc:
            return request.response(ResponseCode.NO_PERMISSION, REMARK_PREFIX + str(exc))
        return None
