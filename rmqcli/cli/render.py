"""Render command results: rich tables on a terminal, tab-separated text when piped, JSON, JSONL, YAML.

Rows are streamed: nothing here builds the full list of a listing in memory, except a rich table,
which is drawn in batches. ``rich`` and ``yaml`` are imported only when used.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TextIO

from rmqcli.pipeline.progress import is_terminal  # also ``rmq pipeline``'s progress line
from rmqcli.remoting.javanames import camel

TABLE_BATCH = 1000
_MIN_CUT = 4  # a cut column keeps at least this many characters (three and an ellipsis)
_ALERT = "bold red"


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    yaml = "yaml"


def resolve_format(output: OutputFormat, json_flag: bool) -> OutputFormat:
    """``--json`` wins over ``--output``."""
    return OutputFormat.json if json_flag else output


@dataclass(frozen=True)
class Column:
    """A table column: the row key, a description, and how to show a value (default ``str``).

    The key names the column everywhere: in a table on a terminal, in the tab-separated text of a
    pipe and in JSON, so a column has one name. ``header`` describes it for readers of the code.
    ``alert``: a value for which it is true is drawn in bold red on a terminal (a bad CRC).
    """

    key: str
    header: str = ""
    show: Callable[[Any], str] | None = None
    justify: str = "left"
    wrap: bool = False  # long free text (properties, bodies) wraps; ids and numbers do not
    alert: Callable[[Any], bool] | None = None

    def text(self, row: Mapping[str, Any]) -> str:
        value = row.get(self.key)
        if self.show is not None:
            return self.show(value)
        return plain(value)

    def alerted(self, row: Mapping[str, Any]) -> bool:
        return self.alert is not None and bool(self.alert(row.get(self.key)))


@dataclass
class Section:
    """A named part of a result: a list of rows (``rows``) or one mapping (``item``)."""

    name: str
    kind: str  # singular, the "section" of each JSONL line
    rows: Iterable[Mapping[str, Any]] | None = None
    item: Mapping[str, Any] | None = None
    columns: list[Column] | None = None
    title: str | None = None


# --- value formatting -----------------------------------------------------------------------------
def human_time(millis: int | None) -> str:
    """Local time of epoch ``millis`` as ``YYYY-MM-DD HH:MM:SS.mmm`` ('' for None, '-' for <= 0)."""
    if millis is None:
        return ""
    if millis <= 0:
        return "-"
    try:
        return datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(millis)


def plain(value: Any) -> str:
    """One cell of plain text: lists space-joined, mappings as compact JSON, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return " ".join(plain(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _tsv_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_PRETTY = json.JSONEncoder(ensure_ascii=False, indent=2, default=str)


def _json(value: Any, indent: int | None = 2) -> str:
    if indent == 2:
        try:
            return _pretty(value, "\n")
        except _Unusual:
            return _PRETTY.encode(value)
    if indent is None:
        return _COMPACT.encode(value)
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


class _Unusual(Exception):
    """A value ``_pretty`` leaves to ``json``'s own encoder."""


_ENCODE_STR = json.encoder.encode_basestring  # the C function ``ensure_ascii=False`` uses
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: _ENCODE_STR,
    int: int.__repr__,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def _pretty(value: Any, newline: str) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2, default=str)``, the same text, built with
    the C encoder's scalars: the pure-Python indenting encoder costs most of a large ``--json``
    listing. Raises ``_Unusual`` for what it does not handle (keys that are not strings, objects
    that need ``default``, subclasses of the scalar types, floats)."""
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        return scalar(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = newline + "  "
        parts = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            parts.append(_ENCODE_STR(key) + ": " + _pretty(item, inner))
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = newline + "  "
        return "[" + inner + ("," + inner).join(_pretty(item, inner) for item in value) + newline + "]"
    raise _Unusual


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False, default_flow_style=False)


# --- emitters ------------------------------------------------------------------------------------
class Renderer:
    """Writes results to ``out`` in one output format."""

    def __init__(self, fmt: OutputFormat, out: TextIO | None = None):
        self.fmt = fmt
        self.out = out or sys.stdout
        self.tty = is_terminal(self.out)

    # lists of rows
    def rows(
        self, rows: Iterable[Mapping[str, Any]], columns: list[Column], *, title: str | None = None
    ) -> None:
        """A listing; ``columns`` choose what table/text output shows (JSON shows every field)."""
        if self.fmt is OutputFormat.json:
            self._json_list(rows, "")
            self.out.write("\n")
        elif self.fmt is OutputFormat.jsonl:
            for row in rows:
                self.out.write(_json(row, None) + "\n")
        elif self.fmt is OutputFormat.yaml:
            wrote = False
            for row in rows:
                self.out.write(_yaml([row]))
                wrote = True
            if not wrote:
                self.out.write("[]\n")
        else:
            self._table(rows, columns, title)

    def item(self, item: Mapping[str, Any], *, title: str | None = None) -> None:
        """One mapping: a two-column table, or one JSON/YAML document."""
        if self.fmt is OutputFormat.json:
            self.out.write(_json(item) + "\n")
        elif self.fmt is OutputFormat.jsonl:
            self.out.write(_json(item, None) + "\n")
        elif self.fmt is OutputFormat.yaml:
            self.out.write(_yaml(dict(item)))
        else:
            self._table(_pairs(item), [Column("field", "Field"), Column("value", "Value")], title)

    def sections(self, sections: list[Section]) -> None:
        """Several named parts: one JSON object / YAML mapping, JSONL lines tagged with ``section``."""
        if self.fmt is OutputFormat.json:
            self.out.write("{")
            for i, sec in enumerate(sections):
                self.out.write(("," if i else "") + "\n  " + _json(sec.name) + ": ")
                if sec.item is not None:
                    self.out.write(_indent(_json(sec.item), "  "))
                else:
                    self._json_list(sec.rows or (), "  ")
            self.out.write("\n}\n" if sections else "}\n")
        elif self.fmt is OutputFormat.jsonl:
            for sec in sections:
                for row in [sec.item] if sec.item is not None else sec.rows or ():
                    self.out.write(_json({"section": sec.kind, **row}, None) + "\n")
        elif self.fmt is OutputFormat.yaml:
            for sec in sections:
                if sec.item is not None:
                    self.out.write(_yaml({sec.name: dict(sec.item)}))
                    continue
                self.out.write(f"{sec.name}:")
                wrote = False
                for row in sec.rows or ():
                    self.out.write(("" if wrote else "\n") + _yaml([dict(row)]))
                    wrote = True
                if not wrote:
                    self.out.write(" []\n")
        else:
            for i, sec in enumerate(sections):
                if i and not self.tty:
                    self.out.write("\n")
                if not self.tty:
                    self.out.write(f"# {sec.title or sec.name}\n")
                if sec.item is not None:
                    cols = sec.columns or [Column("field", "Field"), Column("value", "Value")]
                    self._table(_pairs(sec.item), cols, sec.title or sec.name)
                else:
                    self._table(sec.rows or (), sec.columns or [], sec.title or sec.name)

    # helpers
    def _json_list(self, rows: Iterable[Mapping[str, Any]], prefix: str) -> None:
        self.out.write("[")
        first = True
        for row in rows:
            self.out.write(("\n" if first else ",\n") + prefix + "  " + _indent(_json(row), prefix + "  "))
            first = False
        self.out.write("]" if first else "\n" + prefix + "]")

    def _table(self, rows: Iterable[Mapping[str, Any]], columns: list[Column], title: str | None) -> None:
        if not self.tty:
            self.out.write("\t".join(c.key for c in columns) + "\n")
            for row in rows:
                self.out.write("\t".join(_tsv_cell(c.text(row)) for c in columns) + "\n")
            return
        from rich import box
        from rich.cells import cell_len
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console(file=self.out, highlight=False, soft_wrap=False)
        for n, batch in enumerate(_batches(rows, TABLE_BATCH)):
            if n and not batch:
                break
            cells = [[c.text(row) for c in columns] for row in batch]
            table = Table(
                title=Text(title) if title and n == 0 else None,
                show_header=n == 0,
                box=box.SIMPLE_HEAD,
                title_justify="left",
            )
            content = [max((max(map(cell_len, r[i].splitlines() or [""])) for r in cells), default=0)
                       for i in range(len(columns))]  # fmt: skip
            natural = [max(cell_len(c.key), w) for c, w in zip(columns, content, strict=True)]
            # borders and the padding of one space either side of every cell
            room = console.width - (2 + max(len(columns) - 1, 0)) - 2 * len(columns)
            widths = fit_widths(natural, room, content)
            for c, width, full in zip(columns, widths, natural, strict=True):
                # a cell cut to fit the terminal ends in an ellipsis; free text wraps instead
                table.add_column(
                    Text(c.key),
                    justify=c.justify,  # type: ignore[arg-type]
                    overflow="fold" if c.wrap else "ellipsis",
                    no_wrap=not c.wrap,
                    width=width if width < full else None,
                )
            for row, texts in zip(batch, cells, strict=True):
                # Text, not markup: a topic or key such as "[/b]" is shown as it is
                table.add_row(
                    *(
                        Text(t, style=_ALERT if c.alerted(row) else "")
                        for c, t in zip(columns, texts, strict=True)
                    )
                )
            console.print(table)


def fit_widths(natural: list[int], room: int, content: list[int] | None = None) -> list[int]:
    """Column widths within ``room`` characters (``natural``: what each column needs whole).

    First only headings are cut, down to their column's ``content`` (the widest cell); then the
    widest columns are narrowed first, to one common width, so narrow columns (numbers, flags)
    keep all of their text. No column gets less than ``_MIN_CUT`` characters (a table that still
    does not fit runs past the terminal's edge).
    """
    if sum(natural) <= room or not natural:
        return list(natural)
    content = natural if content is None else content
    least = [min(w, _MIN_CUT) for w in natural]
    for floor in ([max(c, f) for c, f in zip(content, least, strict=True)], least):
        if sum(floor) <= room:
            break
    else:
        return least
    lo, hi = 0, max(natural)  # the largest common width that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(max(f, min(w, mid)) for w, f in zip(natural, floor, strict=True)) <= room:
            lo = mid
        else:
            hi = mid - 1
    widths = [max(f, min(w, lo)) for w, f in zip(natural, floor, strict=True)]
    spare = room - sum(widths)
    for i, w in enumerate(natural):  # the characters left over go to the cut columns, in order
        if spare <= 0:
            break
        if w > widths[i]:
            widths[i] += 1
            spare -= 1
    return widths


def _pairs(item: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for k, v in item.items():
        yield {"field": k, "value": v}


def _indent(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def _batches(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` rows; rows read before an error are still yielded, then it is raised."""
    batch: list[Any] = []
    yielded = False
    it = iter(rows)
    while True:
        try:
            row = next(it)
        except StopIteration:
            break
        except Exception:
            if batch:
                yield batch
            raise
        batch.append(row)
        if len(batch) >= size:
            yield batch
            yielded = True
            batch = []
    if batch or not yielded:
        yield batch


# --- messages and progress on stderr --------------------------------------------------------------
def warn(message: str) -> None:
    """A one-line warning on stderr."""
    sys.stderr.write(f"rmq: warning: {message}\n")
    sys.stderr.flush()


@contextmanager
def progress(total: int, label: str, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (only when stderr is a terminal); yields ``update(completed)``."""
    if not enabled or total <= 0 or not is_terminal(sys.stderr):
        yield lambda _done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=min(done, total))


def camel_dict(obj: Any) -> Any:
    """A result as ``--json`` data: dataclasses become mappings with camelCase keys (beans of
    ``rmqcli.remoting.json_body`` as fastjson writes them: Java names, sorted, nulls dropped),
    lists stay lists, mapping keys become strings. Every command's JSON goes through here."""
    from dataclasses import fields, is_dataclass

    if is_dataclass(obj) and not isinstance(obj, type):
        if _is_bean(obj):
            from rmqcli.remoting.json_body import to_fastjson_value

            return camel_dict(to_fastjson_value(obj))
        return {camel(f.name): camel_dict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, list | tuple):
        return [camel_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k if isinstance(k, str) else str(k): camel_dict(v) for k, v in obj.items()}
    return obj


def _is_bean(obj: Any) -> bool:
    """A JSON body bean: its fields carry their Java property names (``json_body.prop``)."""
    from dataclasses import fields

    return any("json" in f.metadata for f in fields(obj))
