"""The table columns several commands show, one declaration each: a field (its key), its header
and how it is drawn are the same in every table that shows it (a record's topic, queue id and
offsets, a count of messages, a file...). ``number`` makes the right-aligned column of a count,
an offset, a size or an id among a table's own fields.

Kept light: only ``render`` at import time.
"""

from __future__ import annotations

from rmqcli.cli.render import Column, human_time


def number(key: str, header: str = "") -> Column:
    """A right-aligned column: a count, an offset, a size or an id."""
    return Column(key, header, justify="right")


# where a row comes from, and where its data lies
STORE = Column("store", "Store")  # of `rmq pipeline`
FILE = Column("file", "File")
POSITION = Column("position", "Position", justify="right")
OFFSET = Column("offset", "Offset", justify="right")
# how much
SIZE = Column("size", "Size", justify="right")
BYTES = Column("bytes", "Bytes", justify="right")
MESSAGES = Column("messages", "Messages", justify="right")
# a queue and a place in it; a consumer group
TOPIC = Column("topic", "Topic")
QUEUE_ID = Column("queueId", "Queue", justify="right")
QUEUE_OFFSET = Column("queueOffset", "QueueOffset", justify="right")
GROUP = Column("group", "Group")
LEVEL = Column("level", "Level", justify="right")  # a delay level
# a record's fields (``rmqcli.ops.records.record_fields``)
STORE_TIME = Column("storeTimestamp", "StoreTime", show=human_time)
TAGS = Column("tags", "Tags")
KEYS = Column("keys", "Keys")
UNIQ_KEY = Column("uniqKey", "UniqKey")
MSG_ID = Column("offsetMsgId", "MsgId")
# a listing of records (`rmq dump-commitlog`, `rmq pipeline search`) has a column for every field:
# long free text wraps
RECORD_KEYS = Column("keys", "Keys", wrap=True)
# a problem
KIND = Column("kind", "Kind")
REASON = Column("reason", "Reason", wrap=True)


def body_columns(body: str) -> list[Column]:
    """The body column of a listing of records for ``--body`` ``body`` (none: no column)."""
    if body == "none":
        return []
    return [Column("bodySha256" if body == "sha256" else "body", "Body", wrap=True)]
