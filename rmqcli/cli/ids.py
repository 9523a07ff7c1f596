"""``rmq msgid decode`` and ``rmq offset``: message ids and CommitLog offsets, read offline
(``rmqcli.ops.ids``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rmqcli.cli.columns import FILE, OFFSET, POSITION, number
from rmqcli.cli.common import Common, ConfigOpt, command_group, config_output, output_only, value_option
from rmqcli.cli.render import Column, OutputFormat

msgid_app = command_group("msgid", "Message ids, offline.")

ID_COLUMNS = [
    Column("id", "MsgId"),
    Column("storeHost", "StoreHost"),
    number("offset", "CommitLogOffset"),
    FILE,
    POSITION,
    Column("clientIp", "ClientIp"),
    number("pid", "Pid"),
    Column("time", "Time"),
    number("counter", "Counter"),
]
PLACE_COLUMNS = [OFFSET, FILE, POSITION]


def _file_size(config: Path | None) -> int:
    from rmqcli.store.settings import StoreSettings, load_broker_conf

    settings = load_broker_conf(config) if config is not None else StoreSettings()
    return settings.mapped_file_size_commitlog


@msgid_app.command("decode")
@output_only
def decode(
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="Message ids (32 or 56 hex digits).")],
    config: ConfigOpt = None,
    now: value_option(
        str,
        "--now",
        help="A unique key's time is counted within the month before this moment (epoch ms or ISO-8601; "
        "default: now): give a later moment for an id older than a month.",
    ) = None,
    *,
    common: Common,
) -> None:
    """Decode message ids both ways: as an offset message id and as a client's unique key.

    An offset message id (what the broker returns as offsetMsgId, MessageDecoder.createMessageId) is
    the store host, its port and the CommitLog offset, given here with the CommitLog file and the
    position in it (mappedFileSizeCommitLog of --config, else 1 GiB files). A unique key (the msgId a
    client shows, UNIQ_KEY, MessageClientIDSetter) is the client's IP, pid, class loader hash, the
    time to the millisecond (it holds the time since the start of its month: the latest such time
    before now) and a counter. Both have the same length; the id's origin tells which reading holds.
    The offset reading is empty when the id's port field is not a port.
    """
    import datetime as dt

    from rmqcli.cli.common import parse_time
    from rmqcli.ops.ids import decode as decode_id

    size = _file_size(config)
    moment = parse_time(now, "--now")
    when = dt.datetime.fromtimestamp(moment / 1000) if moment is not None else None
    docs = [decode_id(text, size, when) for text in ids]
    renderer = common.renderer()
    if renderer.fmt is OutputFormat.table:
        renderer.rows([_flat(doc) for doc in docs], ID_COLUMNS)
    else:
        renderer.rows(docs, ID_COLUMNS)


def _flat(doc: dict[str, Any]) -> dict[str, Any]:
    return {"id": doc["id"], **(doc["offsetId"] or {}), **doc["uniqueKey"]}


@config_output
def offset(
    places: Annotated[
        list[str],
        typer.Argument(
            metavar="OFFSET|FILE[:POS]...",
            help="CommitLog offsets, or CommitLog file names (20 digits, a path is fine) with a position.",
        ),
    ],
    *,
    common: Common,
) -> None:
    """A CommitLog offset as the file that holds it and the position in that file, and back.

    1073742827 is byte 1003 of file 00000000001073741824 with 1 GiB files (the default;
    mappedFileSizeCommitLog of --config for others), and 00000000001073741824:1003 is offset
    1073742827.
    """
    from rmqcli.ops.ids import parse_place

    size = _file_size(common.config)
    rows = [parse_place(text, size).to_dict() for text in places]
    common.renderer().rows(rows, PLACE_COLUMNS)
