"""The broker's ``config/*.json`` files (formats.md §5.3, ``ConfigManager.java``).

Written by fastjson: bare integer map keys, tab-indented pretty form. Loading falls back to
``<file>.bak`` when the file is missing, empty or unreadable, as ``ConfigManager.load`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formats import fastjson
from rmqcli.durable import replace_file
from rmqcli.errors import CorruptDataError

TOPICS = "topics.json"
SUBSCRIPTIONS = "subscriptionGroup.json"
OFFSETS = "consumerOffset.json"
DELAY = "delayOffset.json"
FILTERS = "consumerFilter.json"
CONFIG_FILES = {"topics": TOPICS, "subscriptions": SUBSCRIPTIONS, "offsets": OFFSETS, "delay": DELAY}


@dataclass
class ConfigFile:
    """A loaded config file: its data and which file it came from (``None``: neither exists)."""

    name: str
    data: dict[str, Any]
    source: Path | None
    error: str | None = None  # why the main file was rejected, when the .bak was used


def config_texts(path: Path) -> Iterator[tuple[Path, str | None, str | None]]:
    """``(file, text, error)`` of ``path``, then of its ``.bak``, as ``ConfigManager.load`` and
    ``loadBak`` read them in turn; an absent one is skipped, an unreadable one has its error."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            yield candidate, None, str(exc)
            continue
        yield candidate, text, None


def load_config(config_dir: Path, name: str) -> ConfigFile:
    path = config_dir / name
    errors = []
    for candidate, text, error in config_texts(path):
        if text is None:
            errors.append(f"{candidate}: {error}")
            continue
        if not text.strip():
            errors.append(f"{candidate}: empty")
            continue
        try:
            data = fastjson.loads(text)
        except ValueError as exc:
            errors.append(f"{candidate}: {exc}")
            continue
        if not isinstance(data, dict):
            errors.append(f"{candidate}: not a JSON object")
            continue
        return ConfigFile(name, data, candidate, "; ".join(errors) or None)
    if errors:
        raise CorruptDataError("; ".join(errors))
    return ConfigFile(name, {}, None)


def topic_configs(config_dir: Path) -> dict[str, dict[str, Any]]:
    return load_config(config_dir, TOPICS).data.get("topicConfigTable", {})


def parse_consumer_offsets(data: dict[str, Any], path: Path | str) -> dict[tuple[str, str], dict[int, int]]:
    """``{(topic, group): {queueId: offset}}`` from a loaded ``consumerOffset.json``."""
    result = {}
    try:
        for key, queues in data.get("offsetTable", {}).items():
            topic, _, group = str(key).rpartition("@")
            result[(topic, group)] = {int(q): int(o) for q, o in queues.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"offsetTable is not a map of queue ids to offsets: {exc}", str(path)
        ) from None
    return result


def parse_delay_offsets(data: dict[str, Any], path: Path | str) -> dict[int, int]:
    """``{delayLevel: next offset in SCHEDULE_TOPIC_XXXX queue level-1}`` from ``delayOffset.json``."""
    try:
        return {int(k): int(v) for k, v in data.get("offsetTable", {}).items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise CorruptDataError(
            f"offsetTable is not a map of delay levels to offsets: {exc}", str(path)
        ) from None


def consumer_offsets(config_dir: Path) -> dict[tuple[str, str], dict[int, int]]:
    loaded = load_config(config_dir, OFFSETS)
    return parse_consumer_offsets(loaded.data, loaded.source or config_dir / OFFSETS)


def delay_offsets(config_dir: Path) -> dict[int, int]:
    loaded = load_config(config_dir, DELAY)
    return parse_delay_offsets(loaded.data, loaded.source or config_dir / DELAY)


def write_config(config_dir: Path, name: str, data: dict[str, Any]) -> Path:
    """Persist like ``ConfigManager.persist``: previous content to ``.bak``, new file via rename.

    Durable: the new file and the ``.bak`` are fsynced before the rename, the directory after it.
    """
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / name
    replace_file(path, fastjson.dumps(data, pretty=True).encode("utf-8"), backup=True)
    return path
