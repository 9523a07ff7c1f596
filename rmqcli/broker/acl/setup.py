"""Opening a broker's ACL: which files, and the validator over them.

The default file is ``rmq serve --acl FILE`` when given, else where 4.9.x looks:
``$ROCKETMQ_HOME/conf/plain_acl.yml`` (and the ``.yml`` files of ``$ROCKETMQ_HOME/conf/acl/``).
Without either, ``aclEnable=true`` is a usage error rather than a broker that refuses everyone.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqcli.broker.acl.addresses import AclConfigError
from rmqcli.broker.acl.brokerkeys import configured_credentials, process_credentials
from rmqcli.broker.acl.messages import Lookup
from rmqcli.broker.acl.ownership import Names
from rmqcli.broker.acl.permissions import NAMESRV_ADMIN_CODES, NAMESRV_BROKER_CODES
from rmqcli.broker.acl.plainacl import ACL_DIR, DEFAULT_FILE, WATCH_SECONDS, PlainAclFiles
from rmqcli.broker.acl.validator import PlainAccessValidator, signature_matches
from rmqcli.errors import UsageError
from rmqcli.remoting.acl import ACCESS_KEY, SIGNATURE, Credentials, signed_content

if TYPE_CHECKING:
    from rmqcli.broker.config import BrokerConfig
    from rmqcli.remoting.codec import RemotingCommand

ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
WATCH_ENV = "RMQ_ACL_WATCH_SECONDS"  # how often the files are checked (default 5 s, as 4.9.x)


class BrokerAcl:
    """The validator and its files, as the controller uses them; ``own`` is the key this process's
    broker signs with when broker.conf gives none (``brokerkeys``)."""

    def __init__(self, files: PlainAclFiles, watch_seconds: float = WATCH_SECONDS):
        self.files = files
        self.validator = PlainAccessValidator(files)
        self.watch_seconds = watch_seconds
        self.own = process_credentials()

    def refusal(
        self, request: RemotingCommand, host: str, look: Lookup | None = None, names: Names | None = None
    ) -> RemotingCommand | None:
        return self.validator.refusal(request, plain_host(host), look, names)

    def signed_by_own(self, request: RemotingCommand) -> bool:
        """``request`` carries this process's key and its signature."""
        fields = request.ext_fields
        if fields.get(ACCESS_KEY) != self.own.access_key:
            return False
        content = signed_content(fields, request.body)
        return signature_matches(content, self.own.secret_key, fields.get(SIGNATURE))


def broker_credentials(config: BrokerConfig, acl: BrokerAcl | None) -> Credentials | None:
    """What the broker signs its requests with: broker.conf's keys, else its process's key (with
    ACL), else nothing."""
    configured = configured_credentials(config)
    if configured is None and acl is not None:
        return acl.own
    return configured


def guard_namesrv(handle: Callable[..., Any], acl: BrokerAcl) -> Callable[..., Any]:
    """The embedded NameServer's dispatch with its writes (``NAMESRV_ADMIN_CODES``) and the brokers'
    registrations (``NAMESRV_BROKER_CODES``) kept for admin accounts; a registration may also be
    signed by this process's broker. 4.9.8's NameServer checks nothing (anyone may unregister a
    broker or register another address under its name); route queries stay open."""

    def guarded(request: RemotingCommand, connection: Any) -> Any:
        code = request.code
        if code in NAMESRV_ADMIN_CODES or (code in NAMESRV_BROKER_CODES and not acl.signed_by_own(request)):
            refusal = acl.refusal(request, connection.peer[0])
            if refusal is not None:
                return refusal
        return handle(request, connection)

    return guarded


def plain_host(host: str) -> str:
    """The peer's address as the white lists see it: an IPv4-mapped IPv6 address as IPv4."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped) if mapped is not None else host


def acl_files_for(config: BrokerConfig, environ: dict[str, str] | None = None) -> tuple[Path, Path | None]:
    """The default ACL file and the ACL directory (None with ``--acl``)."""
    env = os.environ if environ is None else environ
    if config.acl_file:
        return Path(config.acl_file), None
    home = env.get(ROCKETMQ_HOME_ENV)
    if not home:
        raise UsageError(
            "aclEnable=true but no ACL file: give `rmq serve --acl FILE` (a plain_acl.yml) "
            f"or set {ROCKETMQ_HOME_ENV} (the broker reads $ROCKETMQ_HOME/{DEFAULT_FILE})"
        )
    return Path(home) / DEFAULT_FILE, Path(home) / ACL_DIR


def open_acl(config: BrokerConfig) -> BrokerAcl:
    default_file, acl_dir = acl_files_for(config)
    if default_file.is_dir():
        raise UsageError(f"{default_file}: the ACL file is a directory")
    try:
        files = PlainAclFiles(default_file, acl_dir)
    except AclConfigError as exc:
        raise UsageError(f"ACL file not loaded: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{default_file}: {exc.strerror or exc}") from None
    try:
        watch = float(os.environ.get(WATCH_ENV, WATCH_SECONDS))
    except ValueError:
        raise UsageError(f"{WATCH_ENV} must be a number of seconds") from None
    return BrokerAcl(files, max(watch, 0.05))
