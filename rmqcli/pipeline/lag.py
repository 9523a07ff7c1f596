"""``rmq pipeline lag``: ``rmq lag`` for a fleet of stores, one Spark task per store.

Each task opens its store and computes the rows of ``rmqcli.ops.lag`` (the same columns, plus the
store); the driver puts them together in command-line order. A controller-mode store's queues are
cut at its confirm boundary as ``rmq lag`` cuts them (``unconfirmed`` counts the units past it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqcli.pipeline.paths import absolute, check_visible
from rmqcli.pipeline.tasks import open_store

LagTask = tuple[int, str, str | None, str | None, str | None]  # index, store, config, group, topic


def _store_lag(task: LagTask) -> tuple[int, list[dict[str, Any]]]:
    from rmqcli.ops.lag import lag_rows
    from rmqcli.pipeline.session import task_errors

    index, path, config, group, topic = task
    with task_errors():
        store = open_store(path, Path(config) if config else None)
        try:
            return index, [{"store": path, **row.to_dict()} for row in lag_rows(store, group, topic)]
        finally:
            store.close()


def pipeline_lag(
    session,  # type: ignore[no-untyped-def]
    paths: list[Path | str],
    *,
    config: Path | None = None,
    group: str | None = None,
    topic: str | None = None,
    progress: bool | None = None,
) -> list[dict[str, Any]]:
    """Every store's lag rows, stores in command-line order."""
    from rmqcli.pipeline.session import jobs

    conf = absolute(config) if config else None
    tasks: list[LagTask] = [(i, str(Path(p).resolve()), conf, group, topic) for i, p in enumerate(paths)]
    check_visible(session, files=[t[1] for t in tasks] + ([conf] if conf else []))
    with jobs(session, f"lag of {len(tasks)} stores", progress=progress):
        parts = session.sparkContext.parallelize(tasks, len(tasks)).map(_store_lag).collect()
    return [row for _, rows in sorted(parts, key=lambda part: part[0]) for row in rows]
