"""``plain_acl.yml`` files: load, look up, update atomically, reload on change (4.9.x
``PlainPermissionManager``, ``AclFileWatchService``).

The files are the default one (``$ROCKETMQ_HOME/conf/plain_acl.yml``, or ``rmq serve --acl
FILE``) and, as 4.9.x, every ``.yml``/``.yaml`` under ``$ROCKETMQ_HOME/conf/acl/``. An access key
belongs to the first file that defines it; global white addresses are the union of all files.
Each file has a ``dataVersion`` (``[{counter, timestamp}]``) that every update moves on. Values
are read as fastjson binds them to ``PlainAccessConfig`` (a number becomes its text).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rmqcli.broker.acl.addresses import AclConfigError, Matcher, compile_pattern
from rmqcli.broker.acl.permissions import check_resource_perms, parse_perm, parse_resource_perms
from rmqcli.durable import replace_file

log = logging.getLogger(__name__)

KEY_MIN_LENGTH = 6  # AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: longer than 6
WATCH_SECONDS = 5.0  # AclFileWatchService.WATCH_INTERVAL
DEFAULT_FILE = "conf/plain_acl.yml"
ACL_DIR = "conf/acl"
TOOLS_FILE = "conf/tools.yml"


@dataclass
class Account:
    """One entry of ``accounts`` (``PlainAccessConfig`` -> ``PlainAccessResource``)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]  # topics, and groups under their retry topic
    matcher: Matcher = field(repr=False)
    has_perms: bool = False


@dataclass
class DataVersion:
    counter: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))

    def as_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bool(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def build_account(entry: dict[str, Any]) -> Account:
    """``buildPlainAccessResource``: keys checked, permissions and white list compiled."""
    access, secret = _text(entry.get("accessKey")), _text(entry.get("secretKey"))
    if access is None or secret is None or len(access) <= KEY_MIN_LENGTH or len(secret) <= KEY_MIN_LENGTH:
        raise AclConfigError(
            f"The accessKey={access} and secretKey={secret} cannot be null and length should longer than 6"
        )
    topic_perms = entry.get("topicPerms")
    group_perms = entry.get("groupPerms")
    perms = parse_resource_perms(group_perms, topics=False)
    perms.update(parse_resource_perms(topic_perms, topics=True))
    white = _text(entry.get("whiteRemoteAddress"))
    return Account(
        access_key=access,
        secret_key=secret,
        white_remote_address=white,
        admin=_bool(entry.get("admin")),
        default_topic_perm=parse_perm(_text(entry.get("defaultTopicPerm"))),
        default_group_perm=parse_perm(_text(entry.get("defaultGroupPerm"))),
        perms=perms,
        matcher=compile_pattern(white),
        has_perms=bool(topic_perms) or bool(group_perms),
    )


def read_yaml(path: Path) -> dict[str, Any]:
    """A file's mapping; an empty file is an empty mapping; anything else is an ``AclConfigError``."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: expected a mapping with globalWhiteRemoteAddresses and accounts")
    return data


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    """Write beside, fsync, rename into place, fsync the directory: never a half-written file."""
    text = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
    replace_file(path, text.encode("utf-8"), keep_mode=True)


def _version_of(data: dict[str, Any]) -> DataVersion:
    entries = data.get("dataVersion")
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        first = entries[0]
        try:
            return DataVersion(int(first.get("counter", 0)), int(first.get("timestamp", 0)))
        except (TypeError, ValueError):
            pass
    return DataVersion()


class PlainAclFiles:
    """The ACL files of one broker, loaded; ``maybe_reload`` picks up edits made by hand."""

    def __init__(self, default_file: Path, acl_dir: Path | None = None):
        self.default_file = Path(default_file).absolute()
        self.acl_dir = Path(acl_dir).absolute() if acl_dir is not None else None
        self.accounts: dict[str, Account] = {}
        self.owner: dict[str, Path] = {}  # access key -> its file
        self.global_white: list[Matcher] = []
        self.versions: dict[Path, DataVersion] = {}
        self.files: list[Path] = []
        self._stamp: tuple = ()
        self.load()

    # --- loading ---------------------------------------------------------------------------
    def _file_list(self) -> list[Path]:
        files: list[Path] = []
        if self.acl_dir is not None and self.acl_dir.is_dir():
            tools = (self.acl_dir.parent.parent / TOOLS_FILE).absolute()
            for path in sorted(self.acl_dir.rglob("*")):
                if path.suffix in (".yml", ".yaml") and path.is_file() and path.absolute() != tools:
                    files.append(path.absolute())
        if self.default_file.exists() and self.default_file not in files:
            files.append(self.default_file)
        return files

    def _fingerprint(self) -> tuple:
        parts = []
        for path in self._file_list():
            try:
                parts.append((str(path), hashlib.sha1(path.read_bytes()).hexdigest()))
            except OSError:
                parts.append((str(path), ""))
        return tuple(parts)

    def load(self) -> None:
        """Read every file; any error leaves the loaded state as it was and is raised."""
        if not self.default_file.exists():  # assureAclConfigFilesExist
            self.default_file.parent.mkdir(parents=True, exist_ok=True)
            self.default_file.touch()
        files = self._file_list()
        accounts: dict[str, Account] = {}
        owner: dict[str, Path] = {}
        white: list[Matcher] = []
        versions: dict[Path, DataVersion] = {}
        for path in files:
            data = read_yaml(path)
            if not data:
                continue
            try:
                for pattern in data.get("globalWhiteRemoteAddresses") or []:
                    white.append(compile_pattern(_text(pattern)))
                for entry in data.get("accounts") or []:
                    if not isinstance(entry, dict):
                        raise AclConfigError(f"an account is not a mapping: {entry!r}")
                    account = build_account(entry)
                    if account.access_key in owner:
                        log.warning(
                            "%s: access key %s is defined again; the first one counts",
                            path,
                            account.access_key,
                        )
                        continue
                    accounts[account.access_key] = account
                    owner[account.access_key] = path
            except AclConfigError as exc:
                raise AclConfigError(f"{path}: {exc}") from None
            versions[path] = _version_of(data)
        self.accounts, self.owner, self.global_white, self.versions, self.files = (
            accounts, owner, white, versions, files
        )  # fmt: skip
        self._stamp = self._fingerprint()

    def maybe_reload(self) -> bool:
        """Reload when a file changed, appeared or went away; True when it did. A file that no
        longer parses is reported once and the previous configuration stays in force."""
        stamp = self._fingerprint()
        if stamp == self._stamp:
            return False
        try:
            self.load()
        except AclConfigError as exc:
            self._stamp = stamp
            log.error("ACL files not reloaded, the previous configuration stays in force: %s", exc)
            return False
        log.info("ACL files reloaded: %d accounts from %d files", len(self.accounts), len(self.files))
        return True

    # --- queries ---------------------------------------------------------------------------
    def default_version(self) -> DataVersion:
        return self.versions.get(self.default_file) or DataVersion()

    def all_config(self) -> dict[str, Any]:
        """``getAllAclConfig``: every file's global white addresses and accounts, as stored."""
        white: list[str] = []
        configs: list[dict[str, Any]] = []
        seen: set[str] = set()
        for path in self.files:
            data = read_yaml(path)
            white.extend(_text(p) or "" for p in data.get("globalWhiteRemoteAddresses") or [])
            for entry in data.get("accounts") or []:
                key = _text(entry.get("accessKey")) if isinstance(entry, dict) else None
                if key is None or key in seen:
                    continue
                seen.add(key)
                config = {
                    "accessKey": key,
                    "admin": _bool(entry.get("admin")),
                    "defaultGroupPerm": _text(entry.get("defaultGroupPerm")),
                    "defaultTopicPerm": _text(entry.get("defaultTopicPerm")),
                    "groupPerms": [str(p) for p in entry.get("groupPerms") or []] or None,
                    "secretKey": _text(entry.get("secretKey")),
                    "topicPerms": [str(p) for p in entry.get("topicPerms") or []] or None,
                    "whiteRemoteAddress": _text(entry.get("whiteRemoteAddress")),
                }
                configs.append({k: v for k, v in config.items() if v is not None})  # fastjson omits nulls
        return {"globalWhiteAddrs": white, "plainAccessConfigs": configs}

    # --- updates (each writes its file atomically and moves its dataVersion on) -------------
    def _write(self, path: Path, data: dict[str, Any]) -> None:
        version = _version_of(data) if data.get("dataVersion") else self.versions.get(path, DataVersion())
        version = DataVersion(version.counter + 1, int(time.time() * 1000))
        data["dataVersion"] = [version.as_json()]
        write_yaml(path, data)
        self.load()

    def update_account(self, config: dict[str, Any]) -> None:
        """``updateAccessConfig``: replace the account's entry, or add it to the default file."""
        access = config.get("accessKey")
        build_account(config)  # checkPlainAccessConfig: both keys, longer than 6 characters
        check_resource_perms(config.get("topicPerms"))
        check_resource_perms(config.get("groupPerms"))
        path = self.owner.get(access, self.default_file)
        data = read_yaml(path)
        accounts = [a for a in (data.get("accounts") or []) if isinstance(a, dict)]
        for i, entry in enumerate(accounts):
            if _text(entry.get("accessKey")) == access:
                merged = dict(entry)
                merged.update({k: v for k, v in config.items() if v is not None})
                accounts[i] = merged
                break
        else:
            accounts.append({k: v for k, v in config.items() if v is not None})
        data["accounts"] = accounts
        self._write(path, data)

    def delete_account(self, access_key: str) -> bool:
        """``deleteAccessConfig``: False when no file holds the key."""
        path = self.owner.get(access_key)
        if not access_key or path is None:
            return False
        data = read_yaml(path)
        accounts = [a for a in (data.get("accounts") or []) if isinstance(a, dict)]
        kept = [a for a in accounts if _text(a.get("accessKey")) != access_key]
        if len(kept) == len(accounts):
            return False
        data["accounts"] = kept
        self._write(path, data)
        return True

    def update_global_white(self, addresses: list[str], file: str | None = None) -> None:
        """``updateGlobalWhiteAddrsConfig``: the list of the default file, or of one of the ACL
        files (``aclFileFullPath``); any other path is refused."""
        path = self.default_file
        if file:
            wanted = Path(file).absolute()
            if wanted not in self.files:
                raise AclConfigError(f"{file} is not one of this broker's ACL files")
            path = wanted
        for pattern in addresses:
            compile_pattern(pattern)
        data = read_yaml(path)
        data["globalWhiteRemoteAddresses"] = list(addresses)
        self._write(path, data)
