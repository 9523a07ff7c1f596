"""Options shared by the store commands, time parsing, and opening what a path names.

Kept light: only ``typer`` and the standard library at import time (``rmq --help`` stays fast).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rmqcli.cli.render import OutputFormat, warn
from rmqcli.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from rmqcli.store import Store
    from rmqcli.store.read.commitlog import Corruption

StoreArg = Annotated[Path, typer.Argument(metavar="STORE", help="A store directory.")]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="Output format: table (text when piped), json, jsonl or yaml."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --output json.")]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="broker.conf of the store (file sizes, storePathCommitLog, index geometry).",
        dir_okay=False,
    ),
]

SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Only records stored at or after TIME (epoch ms or ISO-8601)."),
]
UntilOpt = Annotated[
    str | None,
    typer.Option("--until", help="Only records stored at or before TIME (epoch ms or ISO-8601)."),
]


# `rmq rebuild` and `rmq pipeline rebuild`: what to rebuild (``rebuild_targets``)
RebuildCqOpt = Annotated[bool, typer.Option("--cq", help="Rebuild the consume queues.")]
RebuildIndexOpt = Annotated[bool, typer.Option("--index", help="Rebuild the index files.")]
RebuildTopicOpt = Annotated[
    str | None, typer.Option("--topic", "-t", help="Only this topic's consume queues (with --cq).")
]


def rebuild_targets(cq: bool, index: bool, topic: str | None) -> tuple[bool, bool]:
    """(consume queues, index files) to rebuild: both without --cq and --index, only the consume
    queues with --topic alone."""
    both = not cq and not index and topic is None
    return cq or both or (topic is not None and not index), index or both


def parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds from epoch millis or ISO-8601 (local time when no zone is given)."""
    if text is None:
        return None
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise UsageError(f"{option}: {text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    return int(moment.timestamp() * 1000)  # naive = local time


def check_store_dir(path: Path) -> None:
    """``NotFoundError`` when ``path`` does not exist, ``UsageError`` when it is not a directory."""
    if not path.exists():
        raise NotFoundError(f"{path}: no such store directory")
    if not path.is_dir():
        raise UsageError(f"{path}: expected a store directory, not a file")


def open_store(path: Path, config: Path | None) -> Store:
    """The store at ``path`` (a directory); ``NotFoundError`` when there is none."""
    from rmqcli.store import Store

    check_store_dir(path)
    if config is not None and not config.is_file():
        raise NotFoundError(f"{config}: no such broker.conf")
    return Store.open(path, config)


def warn_skipped(stretch: Corruption) -> None:
    """The warning on stderr for a corrupt stretch that ``--skip-corrupt`` skips."""
    warn(f"{stretch.file} at byte {stretch.file_position}: {stretch.reason}; skipped {stretch.length} bytes")


def require_path(path: Path) -> None:
    if not path.exists():
        raise NotFoundError(f"{path}: no such file or directory")


class BodyChoice(StrEnum):
    """``--body``: how a record's body is shown (mirrors ``rmqcli.ops.records.BodyMode``)."""

    none = "none"
    utf8 = "utf8"
    hex = "hex"
    base64 = "base64"
    sha256 = "sha256"


BodyOpt = Annotated[
    BodyChoice, typer.Option("--body", help="Show the body as none, utf8, hex, base64 or sha256.")
]
