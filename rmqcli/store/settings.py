"""Store settings (``MessageStoreConfig``): the store's keys of broker.conf, read through
``rmqcli.conf`` (its table has their types and RocketMQ's defaults).

``infer`` fills the sizes a store's own files reveal, so ``rmq`` reads a store written with
non-default sizes without being told.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from formats import commitlog as fmt
from rmqcli.conf.keys import KEYS, setting, settings_of
from rmqcli.conf.parse import conf_of, read_properties, refused

DEFAULT_COMMITLOG_FILE_SIZE: int = KEYS["mappedFileSizeCommitLog"].default


@dataclass(frozen=True)
class StoreSettings:
    mapped_file_size_commitlog: int = setting("mappedFileSizeCommitLog")
    mapped_file_size_consume_queue: int = setting("mappedFileSizeConsumeQueue")
    max_hash_slot_num: int = setting("maxHashSlotNum")
    max_index_num: int = setting("maxIndexNum")
    message_delay_level: str = setting("messageDelayLevel")
    message_index_enable: bool = setting("messageIndexEnable")
    message_index_safe: bool = setting("messageIndexSafe")
    check_crc_on_recover: bool = setting("checkCRCOnRecover")
    # the comma-separated paths of ``storePathCommitLog``; empty: <root>/commitlog
    store_path_commitlog: tuple[str, ...] = setting("storePathCommitLog", ())
    explicit: frozenset[str] = field(default_factory=frozenset)  # names set by the user


PROPERTY_NAMES = settings_of(StoreSettings)  # broker.conf key -> field name


def settings_from_properties(props: Mapping[str, str], base: StoreSettings | None = None) -> StoreSettings:
    """``base`` (default: the defaults) with the store's keys broker.conf sets."""
    base = base or StoreSettings()
    changes = conf_of(props).values(StoreSettings, given_only=True)
    levels = changes.get("message_delay_level")
    if levels is not None:
        try:
            fmt.parse_delay_levels(levels)
        except ValueError as exc:
            raise refused(
                f"messageDelayLevel={levels!r} is not a list like '1s 5s 1m 2h 1d' ({exc})"
            ) from exc
    paths = changes.get("store_path_commitlog")
    if paths is not None:
        changes["store_path_commitlog"] = tuple(p for p in paths.split(",") if p and p != "<path>")
    return replace(base, **changes, explicit=base.explicit | frozenset(changes))


def load_broker_conf(path: Path, base: StoreSettings | None = None) -> StoreSettings:
    return settings_from_properties(read_properties(path), base)
