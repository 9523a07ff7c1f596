"""Records left out of the consume queues because their topic cannot name a queue directory.

The dispatchers (``rmqcli.store.write.dispatch``, ``fastdispatch``) never write a queue for a topic that
``naming.topic_dir_problem`` refuses (``..``, a ``/``, a NUL, ...): a broker would create it outside
the store or fail. The repair commands and the pipeline say so in their plans, a note per topic
and an entry in ``Plan.skipped`` (``skipped`` in ``--json``); ``rmq verify`` lists every such
record as an ``unsafe-topic`` error.
"""

from __future__ import annotations

from typing import Any

from rmqcli.errors import NotFoundError
from rmqcli.ops.safety import Plan, plan_path
from rmqcli.store import Store
from rmqcli.store.write.dispatch import UnsafeTopic

KIND = "unsafe-topic"


def locate(store: Store, offset: int) -> tuple[str | None, int]:
    """(CommitLog file as a plan names it, byte offset in it) of global ``offset``; (None, offset)
    when no file holds it."""
    try:
        mf = store.commitlog.queue.find(offset)
    except NotFoundError:
        return None, offset
    return plan_path(store.root, mf.path), offset - mf.from_offset


def describe(store: Store, unsafe: dict[str, UnsafeTopic]) -> list[dict[str, Any]]:
    """One entry per topic, in CommitLog order of its first record."""
    out = []
    for entry in sorted(unsafe.values(), key=lambda e: e.first_offset):
        file, offset = locate(store, entry.first_offset)
        out.append(
            {
                "kind": KIND,
                "topic": entry.topic,
                "reason": entry.reason,
                "records": entry.records,
                "queueIds": sorted(entry.queue_ids),
                "file": file,
                "offset": offset,
            }
        )
    return out


def report(plan: Plan, store: Store, unsafe: dict[str, UnsafeTopic]) -> None:
    """Add a note and a ``skipped`` entry to ``plan`` for each topic of ``unsafe``."""
    for item in describe(store, unsafe):
        plan.skipped.append(item)
        where = f"{item['file']} at byte {item['offset']}" if item["file"] else f"offset {item['offset']}"
        plan.notes.append(
            f"{item['records']} record(s) of topic {item['topic']!r} (the first in {where}) go to no "
            f"consume queue: {item['reason']}; nothing is written for them (rmq verify lists each)"
        )
