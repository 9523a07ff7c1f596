"""Where an admin command finds the ACL credentials it signs with.

In this order: ``--access-key``/``--secret-key``; the ``RMQ_ACCESS_KEY``/``RMQ_SECRET_KEY``
(``RMQ_SECURITY_TOKEN``) environment variables; ``$ROCKETMQ_HOME/conf/tools.yml``, the file
mqadmin reads (``MQAdminStartup`` -> ``AclUtils.getAclRPCHook``: keys ``accessKey`` and
``secretKey``; a missing file or a blank key means no signing). None: requests go unsigned.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rmqcli.errors import UsageError

if TYPE_CHECKING:
    from rmqcli.remoting.acl import Credentials

ENV_ACCESS_KEY = "RMQ_ACCESS_KEY"
ENV_SECRET_KEY = "RMQ_SECRET_KEY"
ENV_SECURITY_TOKEN = "RMQ_SECURITY_TOKEN"
ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
TOOLS_FILE = "conf/tools.yml"  # MixAll.ACL_CONF_TOOLS_FILE, under the RocketMQ home


def _pair(access: str | None, secret: str | None, token: str | None, source: str) -> Credentials | None:
    from rmqcli.remoting.acl import Credentials

    access, secret = (access or "").strip(), (secret or "").strip()
    if not access and not secret:
        return None
    if not access or not secret:
        missing = "access key" if not access else "secret key"
        raise UsageError(f"{source}: a {missing} is needed too (give both the access key and the secret key)")
    return Credentials(access, secret, (token or "").strip() or None)


def _scalar(value: object) -> str:
    """A YAML scalar as fastjson's ``getString`` gives it (``secretKey: 12345678`` is a number)."""
    if value is None or isinstance(value, dict | list):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def tools_yml_credentials(path: Path) -> Credentials | None:
    """``AclUtils.getAclRPCHook(path)``: the keys of mqadmin's ``tools.yml``, None without them."""
    import yaml

    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: cannot read the ACL tools file: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        return None
    access, secret = (_scalar(data.get(key)) for key in ("accessKey", "secretKey"))
    if not access.strip() or not secret.strip():
        return None  # mqadmin signs nothing when a key is blank
    return _pair(access, secret, None, str(path))


def resolve_credentials(
    access_key: str | None = None, secret_key: str | None = None, environ: Mapping[str, str] | None = None
) -> Credentials | None:
    """The credentials to sign with: flags, then environment, then ``tools.yml``; else None."""
    env = os.environ if environ is None else environ
    found = _pair(access_key, secret_key, env.get(ENV_SECURITY_TOKEN), "--access-key/--secret-key")
    if found is not None:
        return found
    found = _pair(
        env.get(ENV_ACCESS_KEY),
        env.get(ENV_SECRET_KEY),
        env.get(ENV_SECURITY_TOKEN),
        f"${ENV_ACCESS_KEY}/${ENV_SECRET_KEY}",
    )
    if found is not None:
        return found
    home = env.get(ROCKETMQ_HOME_ENV)
    return tools_yml_credentials(Path(home) / TOOLS_FILE) if home else None
