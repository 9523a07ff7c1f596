"""Options shared by the store commands, time parsing, and opening what a path names.

The options every store command ends with (``--config``, ``--output``, ``--json``) are declared
once: ``config_output`` and ``output_only`` give them to a command, which takes what they say as
one ``Common``.

Kept light: only ``typer`` and the standard library at import time (``rmq --help`` stays fast).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqcli.cli.commands import GROUP_SETTINGS
from rmqcli.cli.render import OutputFormat, Renderer, resolve_format, warn
from rmqcli.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from rmqcli.store import Store
    from rmqcli.store.read.commitlog import Corruption

StoreArg = Annotated[Path, typer.Argument(metavar="STORE", help="A store directory.")]
OutputOpt = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="Output format: table (text when piped), json, jsonl or yaml."),
]


def value_option(kind: Any, *flags: str, help: str, **settings: Any) -> Any:
    """An option that takes a value of ``kind`` and is None when not given: ``flags`` and the rest
    of ``typer.Option``'s settings (``min``, ``metavar``, ...), worded for the command."""
    return Annotated[kind | None, typer.Option(*flags, help=help, **settings)]


def switch_option(*flags: str, help: str) -> Any:
    """A boolean option: ``--flag`` (off unless given) or ``--flag/--no-flag``, worded for the command."""
    return Annotated[bool, typer.Option(*flags, help=help)]


def topic_option(help: str) -> Any:
    """``--topic/-t TOPIC``: the one topic a command reads or keeps, worded for the command."""
    return value_option(str, "--topic", "-t", help=help)


def queue_option(help: str) -> Any:
    """``--queue/-q QUEUE``: a queue id, worded for the command."""
    return value_option(int, "--queue", "-q", help=help)


def key_option(help: str) -> Any:
    """``--key/-k KEY``: a message key to look for, worded for the command."""
    return value_option(str, "--key", "-k", help=help)


JsonOpt = switch_option("--json", help="Same as --output json.")
ConfigOpt = value_option(
    Path,
    "--config",
    help="broker.conf of the store (file sizes, storePathCommitLog, index geometry).",
    dir_okay=False,
)


@dataclass(frozen=True)
class Common:
    """What the options every store command ends with say: the output format (``--output``, with
    ``--json`` winning) and, for a command that reads a store, its broker.conf (``--config``)."""

    fmt: OutputFormat
    config: Path | None = None

    def renderer(self) -> Renderer:
        """The renderer of ``fmt`` on stdout."""
        return Renderer(self.fmt)


def _config_output(
    config: ConfigOpt = None, output: OutputOpt = OutputFormat.table, json_: JsonOpt = False
) -> Common:
    return Common(resolve_format(output, json_), config)


def _output(output: OutputOpt = OutputFormat.table, json_: JsonOpt = False) -> Common:
    return Common(resolve_format(output, json_))


def with_options(template: Callable[..., Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: the typer command of ``func(..., *, common)`` takes ``func``'s own parameters,
    then those of ``template`` (its options, in its order); ``common`` is what ``template`` returns
    for their values."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "common"]
        shared = list(inspect.signature(template, eval_str=True).parameters.values())

        @functools.wraps(func, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def command(**values: Any) -> None:
            common = template(**{p.name: values.pop(p.name) for p in shared})
            func(**values, common=common)

        command.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
        del command.__wrapped__  # type: ignore[attr-defined]  # typer reads the signature above
        return command

    return decorate


config_output = with_options(_config_output)
"""``--config``, ``--output`` and ``--json`` after a command's own options."""
output_only = with_options(_output)
"""``--output`` and ``--json`` after a command's own options."""


def command_group(name: str, help: str) -> typer.Typer:
    """A group of ``rmq`` subcommands (``msgid``, ``offsets``, ``pipeline``), set up as ``rmq``
    itself: ``-h`` for help, plain text, and its help when run without a subcommand."""
    return typer.Typer(name=name, help=help, **GROUP_SETTINGS)


def stored_time_option(flag: str, what: str, side: str) -> Any:
    """``FLAG TIME``: only ``what`` stored at or ``side`` (after, before) TIME, read by ``parse_time``."""
    help_ = f"Only {what} stored at or {side} TIME (epoch ms or ISO-8601)."
    return Annotated[str | None, typer.Option(flag, help=help_)]


SinceOpt = stored_time_option("--since", "records", "after")
UntilOpt = stored_time_option("--until", "records", "before")


def record_offset_option(flag: str, verb: str) -> Any:
    """``FLAG OFFSET``: a physical offset of the CommitLog, where a command ``verb`` (starts, cuts)."""
    help_ = f"{verb} at the first record at or after this physical offset."
    return Annotated[int | None, typer.Option(flag, help=help_)]


def skip_corrupt_option(then: str) -> Any:
    """``--skip-corrupt``: each corrupt stretch is reported, then the command ``then`` (goes on, counts
    on); the exit code stays 4."""
    help_ = f"Report corrupt stretches and {then} (the exit code stays 4)."
    return switch_option("--skip-corrupt", help=help_)


# `rmq lag` and `rmq pipeline lag`
LagGroupOpt = value_option(str, "--group", "-g", help="Only this consumer group.")
LagTopicOpt = topic_option("Only this topic.")


# `rmq rebuild` and `rmq pipeline rebuild`: what to rebuild (``rebuild_targets``)
RebuildCqOpt = switch_option("--cq", help="Rebuild the consume queues.")
RebuildIndexOpt = switch_option("--index", help="Rebuild the index files.")
RebuildTopicOpt = topic_option("Only this topic's consume queues (with --cq).")


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
