"""Store settings (``MessageStoreConfig``) and the ``broker.conf`` properties format.

Defaults are RocketMQ's. ``infer`` fills the sizes a store's own files reveal, so ``rmq`` reads
a store written with non-default sizes without being told.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from formats import commitlog as fmt
from formats import indexfile
from formats.commitlog import DEFAULT_DELAY_LEVELS
from formats.consumequeue import DEFAULT_CQ_FILE_SIZE
from formats.javatext import parse_boolean
from rmqcli.errors import UsageError

DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024


@dataclass(frozen=True)
class StoreSettings:
    mapped_file_size_commitlog: int = DEFAULT_COMMITLOG_FILE_SIZE
    mapped_file_size_consume_queue: int = DEFAULT_CQ_FILE_SIZE
    max_hash_slot_num: int = indexfile.DEFAULT_HASH_SLOT_NUM
    max_index_num: int = indexfile.DEFAULT_INDEX_NUM
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    message_index_enable: bool = True
    message_index_safe: bool = False
    check_crc_on_recover: bool = True
    store_path_commitlog: tuple[str, ...] = ()  # empty: <root>/commitlog
    explicit: frozenset[str] = field(default_factory=frozenset)  # names set by the user


# broker.conf key -> field name
PROPERTY_NAMES = {
    "mappedFileSizeCommitLog": "mapped_file_size_commitlog",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "maxHashSlotNum": "max_hash_slot_num",
    "maxIndexNum": "max_index_num",
    "messageDelayLevel": "message_delay_level",
    "messageIndexEnable": "message_index_enable",
    "messageIndexSafe": "message_index_safe",
    "checkCRCOnRecover": "check_crc_on_recover",
    "storePathCommitLog": "store_path_commitlog",
}


def read_properties(path: Path) -> dict[str, str]:
    """Java ``.properties``: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    result: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                result[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            result[line] = ""
    return result


def settings_from_properties(props: dict[str, str], base: StoreSettings | None = None) -> StoreSettings:
    base = base or StoreSettings()
    types = {f.name: f.type for f in fields(StoreSettings)}
    changes: dict[str, object] = {}
    for key, name in PROPERTY_NAMES.items():
        if key not in props:
            continue
        raw = props[key]
        kind = types[name]
        try:
            if kind == "int":
                changes[name] = int(raw)
            elif kind == "bool":
                changes[name] = parse_boolean(raw)
            elif name == "message_delay_level":
                try:
                    fmt.parse_delay_levels(raw)
                except ValueError as exc:
                    raise UsageError(
                        f"broker.conf: {key}={raw!r} is not a list like '1s 5s 1m 2h 1d' ({exc})"
                    ) from exc
                changes[name] = raw
            elif name == "store_path_commitlog":
                changes[name] = tuple(p for p in raw.split(",") if p and p != "<path>")
            else:
                changes[name] = raw
        except ValueError as exc:
            raise UsageError(f"broker.conf: {key}={raw!r} is not valid ({exc})") from exc
    return replace(base, **changes, explicit=base.explicit | frozenset(changes))


def load_broker_conf(path: Path, base: StoreSettings | None = None) -> StoreSettings:
    return settings_from_properties(read_properties(path), base)
