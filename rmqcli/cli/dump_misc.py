"""``rmq dump-checkpoint``, ``rmq dump-epoch`` and ``rmq dump-config``: the small files of a store."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqcli.cli.columns import GROUP, LEVEL, OFFSET, QUEUE_ID, TOPIC, number
from rmqcli.cli.common import Common, output_only, require_path
from rmqcli.cli.render import Column, Section, human_time, warn
from rmqcli.errors import NotFoundError

TIME_FIELDS = (
    "physicMsgTimestamp",
    "logicsMsgTimestamp",
    "indexMsgTimestamp",
    "minTimestamp",
    "minTimestampIndex",
)


@output_only
def dump_checkpoint(
    path: Annotated[
        Path, typer.Argument(metavar="STORE_OR_FILE", help="A store directory or a checkpoint file.")
    ],
    *,
    common: Common,
) -> None:
    """Dump the checkpoint: its five fields, their times, and the recovery minimum timestamps.

    minTimestamp is StoreCheckpoint.getMinTimestamp (min of physic and logics, less 3 s) and
    minTimestampIndex also takes the index timestamp into account.
    """
    from rmqcli.ops.dump import checkpoint_fields
    from rmqcli.store.checkpoint import read_checkpoint

    require_path(path)
    file = path / "checkpoint" if path.is_dir() else path
    item: dict[str, Any] = checkpoint_fields(read_checkpoint(file))
    for name in TIME_FIELDS:
        item[name + "Human"] = human_time(item[name])
    common.renderer().item(item, title=str(file))


class ConfigKind(StrEnum):
    topics = "topics"
    subscriptions = "subscriptions"
    offsets = "offsets"
    delay = "delay"


CONFIG_COLUMNS = {
    "topics": [
        Column("topicName", "Topic"),
        number("readQueueNums", "ReadQueues"),
        number("writeQueueNums", "WriteQueues"),
        number("perm", "Perm"),
        Column("order", "Order"),
        Column("topicFilterType", "FilterType"),
        number("topicSysFlag", "SysFlag"),
    ],
    "subscriptions": [
        Column("groupName", "Group"),
        Column("consumeEnable", "Consume"),
        Column("consumeBroadcastEnable", "Broadcast"),
        Column("consumeFromMinEnable", "FromMin"),
        number("retryQueueNums", "RetryQueues"),
        number("retryMaxTimes", "RetryMax"),
        number("brokerId", "BrokerId"),
        number("whichBrokerWhenConsumeSlowly", "SlowBroker"),
    ],
    "offsets": [TOPIC, GROUP, QUEUE_ID, OFFSET],
    "delay": [LEVEL, QUEUE_ID, OFFSET],
}
SINGULAR = {"topics": "topic", "subscriptions": "subscription", "offsets": "offset", "delay": "delay"}


@output_only
def dump_config(
    path: Annotated[
        Path, typer.Argument(metavar="STORE", help="A store directory (or its config directory).")
    ],
    kind: Annotated[
        ConfigKind | None,
        typer.Argument(
            metavar="KIND", help="Which file: topics, subscriptions, offsets or delay (default: all)."
        ),
    ] = None,
    *,
    common: Common,
) -> None:
    """Dump the broker's config files.

    topics.json, subscriptionGroup.json, consumerOffset.json and delayOffset.json, read as the
    broker reads them: fastjson syntax, falling back to the .bak file when a file is missing,
    empty or unreadable.
    """
    from rmqcli.ops.dump import config_dump

    config_dir = _config_dir(path)
    kinds = [kind.value] if kind else [k.value for k in ConfigKind]
    dumps = [config_dump(config_dir, k) for k in kinds]
    for d in dumps:
        if d.warning:
            warn(f"{d.kind}: used {d.source} ({d.warning})")
    renderer = common.renderer()
    if kind is not None:
        renderer.rows(dumps[0].rows, CONFIG_COLUMNS[kind.value])
        return
    renderer.sections(
        [Section(d.kind, SINGULAR[d.kind], rows=d.rows, columns=CONFIG_COLUMNS[d.kind]) for d in dumps]
    )


def _config_dir(path: Path) -> Path:
    """The config directory ``path`` names: a store's ``config/``, or a directory holding the files.

    A store without ``config/`` has empty configuration (the broker starts with none); a directory
    that is neither a store nor holds a config file is not found.
    """
    from rmqcli.store.configfiles import CONFIG_FILES
    from rmqcli.store.store import CONFIG_DIR, has_store_layout, not_a_store

    require_path(path)
    if not path.is_dir():
        raise NotFoundError(f"{path}: not a directory (dump-config takes a store or its config directory)")
    if (path / CONFIG_DIR).is_dir():
        return path / CONFIG_DIR
    names = list(CONFIG_FILES.values())
    if any((path / n).exists() or (path / (n + ".bak")).exists() for n in names):
        return path
    if has_store_layout(path):
        warn(f"{path}: no {CONFIG_DIR}/ directory: the broker starts with empty configuration")
        return path / CONFIG_DIR
    raise NotFoundError(not_a_store(path))


EPOCH_COLUMNS = [
    number("epoch", "Epoch"),
    number("startOffset", "StartOffset"),
    number("endOffset", "EndOffset"),
    number("records", "Records"),
]


@output_only
def dump_epoch(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="STORE_OR_FILE", help="A store directory, or an epochFileCheckpoint (or .bak) file."
        ),
    ],
    *,
    common: Common,
) -> None:
    """Dump a RocketMQ 5 controller-mode broker's epochs and identity.

    epochFileCheckpoint (falling back to its .bak as the broker does when the file is missing,
    empty or fails its count or CRC check) lists each epoch in which a master wrote, with the
    CommitLog offset it started at; an epoch ends where the next starts, the last at the CommitLog's
    end (as mqadmin getBrokerEpoch shows them), and Records counts the CommitLog records in each
    (a store directory only). brokerIdentity holds the cluster, broker name and the broker id the
    controller gave this broker. A damaged file is warned about on stderr; with neither file usable
    the command exits 4.
    """
    from rmqcli.ops.epochs import epoch_dump

    require_path(path)
    dump = epoch_dump(path)
    for line in dump.warnings:
        warn(line)
    sections = [Section("epochFile", "epochFile", item=dump.file, title=str(dump.file.get("source")))]
    if dump.identity is not None:
        sections.append(
            Section("brokerIdentity", "brokerIdentity", item=dump.identity, title="brokerIdentity")
        )
    sections.append(Section("epochs", "epoch", rows=dump.rows, columns=EPOCH_COLUMNS, title="Epochs"))
    common.renderer().sections(sections)
