"""The store page's reports: the ``--json`` documents of ``rmq stats``, ``verify``, ``lag``,
``delay-report`` and ``tx-report`` for one store, written by the CLI's own renderer from the
CLI's own functions (``rmqcli.ops``) and sections (``cli.stats.stats_sections``,
``cli.verify.verify_sections``, ``cli.reports``' columns), so the text is byte for byte what
``rmq <command> STORE --json`` prints. No ``--config`` (the dashboard has no broker.conf per store),
no ``--skip-corrupt``: a corrupt record is the CLI's one-line ``CorruptDataError``."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rmqcli.cli.common import open_store
from rmqcli.cli.render import OutputFormat, Renderer, camel_dict
from rmqcli.store import Store

MAX_PROBLEMS = 1000  # verify's listed problems at most (every one is still counted)


def _rendered(write: Callable[[Renderer], None]) -> str:
    out = io.StringIO()
    write(Renderer(OutputFormat.json, out))
    return out.getvalue()


def _rows(rows: Iterable[Mapping[str, Any]], columns: list[Any]) -> str:
    return _rendered(lambda r: r.rows(rows, columns))


def _with_store(path: Path, read: Callable[[Store], str]) -> str:
    store = open_store(path, None)
    try:
        return read(store)
    finally:
        store.close()


def stats_json(path: Path) -> str:
    """``rmq stats STORE --json`` (cli/stats.py's sections, without ``--skip-corrupt``)."""
    from rmqcli.cli import stats as cli
    from rmqcli.ops.stats import store_stats

    def read(store: Store) -> str:
        result = camel_dict(store_stats(store))
        cli.warn_unsafe(result["unsafeTopics"])
        return _rendered(lambda r: r.sections(cli.stats_sections(result)))

    return _with_store(path, read)


def verify_json(
    path: Path, *, crc: bool = True, topic: str | None = None, max_problems: int = MAX_PROBLEMS
) -> str:
    """``rmq verify STORE --json [--no-crc] [--topic T] --max-problems N``: its document, also
    when it finds errors (the CLI prints it, then exits 4)."""
    from rmqcli.cli.verify import verify_sections
    from rmqcli.ops.verify import verify_store

    def read(store: Store) -> str:
        report = verify_store(store, crc=crc, topic=topic, max_problems=max_problems)
        return _rendered(lambda r: r.sections(verify_sections(report)))

    return _with_store(path, read)


def lag_json(path: Path, group: str | None = None, topic: str | None = None) -> str:
    """``rmq lag STORE --json [-g GROUP] [-t TOPIC]``."""
    from rmqcli.cli.reports import LAG_COLUMNS, warn_lag_unconfirmed
    from rmqcli.ops.lag import lag_rows

    def read(store: Store) -> str:
        rows = [row.to_dict() for row in lag_rows(store, group, topic)]
        warn_lag_unconfirmed(rows, str(path))
        return _rows(rows, LAG_COLUMNS)

    return _with_store(path, read)


def delay_json(path: Path) -> str:
    """``rmq delay-report STORE --json`` (the levels; not ``--list``)."""
    from rmqcli.cli.reports import DELAY_COLUMNS
    from rmqcli.ops.delayreport import levels

    return _with_store(path, lambda store: _rows([r.to_dict() for r in levels(store)], DELAY_COLUMNS))


def tx_json(path: Path) -> str:
    """``rmq tx-report STORE --json`` (ages as of now)."""
    from rmqcli.cli.reports import TX_COLUMNS
    from rmqcli.ops.txreport import half_messages

    def read(store: Store) -> str:
        now = int(time.time() * 1000)
        return _rows([row.to_dict(now) for row in half_messages(store)], TX_COLUMNS)

    return _with_store(path, read)
