"""``rmq pipeline ...``: bulk jobs over many stores on Apache Spark (``rmqcli.pipeline``).

Imports only typer and light modules: PySpark is loaded inside the commands.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqcli.cli.columns import (
    BYTES,
    MESSAGES,
    MSG_ID,
    POSITION,
    QUEUE_ID,
    QUEUE_OFFSET,
    RECORD_KEYS,
    STORE,
    TAGS,
    TOPIC,
    UNIQ_KEY,
    body_columns,
    number,
)
from rmqcli.cli.common import (
    BodyChoice,
    BodyOpt,
    Common,
    ConfigOpt,
    LagGroupOpt,
    LagTopicOpt,
    OutputOpt,
    RebuildCqOpt,
    RebuildIndexOpt,
    RebuildTopicOpt,
    SinceOpt,
    UntilOpt,
    command_group,
    key_option,
    parse_time,
    rebuild_targets,
    switch_option,
    value_option,
    with_options,
)
from rmqcli.cli.plan import DryRunOpt, ForceUnlockedOpt, YesOpt, confirm
from rmqcli.cli.render import Column, OutputFormat, Renderer, Section, resolve_format, warn
from rmqcli.pipeline.schema import PARTITION_COLUMNS, ExportBody, ExportFormat, schema_help

StoresArg = Annotated[
    list[str],
    typer.Argument(
        metavar="STORE...",
        help="Store directories. Each must be visible under the same path to the driver and to every "
        "Spark executor (a local run, or a filesystem shared by the cluster).",
    ),
]
UrlStoresArg = Annotated[
    list[str],
    typer.Argument(
        metavar="STORE...",
        help="Store directories, visible under the same path to the driver and to every Spark executor "
        "(a local run, or a filesystem shared by the cluster), or URLs Spark can read (hdfs://, s3a://, "
        "file://, ...: the CommitLog files are read through Spark).",
    ),
]
TopicsOpt = value_option(list[str], "--topic", "-t", help="Only records of this topic (repeatable).")
MasterOpt = value_option(
    str,
    "--master",
    help="Spark master URL (default: local[*], or the one spark-submit gives).",
    show_default=False,
)
JsonOpt = switch_option("--json", help="Print the result as JSON.")

HELP = """Bulk jobs over the stores of many brokers on Apache Spark (PySpark).

Every job splits the work into one Spark task per CommitLog file and decodes the files with the
same readers as the single-process commands, so its results equal theirs: export equals
dump-commitlog, stats equals stats, rebuild writes rebuild's bytes. The jobs run in a local Spark
(local[*]) unless --master names a cluster; `spark-submit $(which rmq) pipeline ...` works too.

Requirements: PySpark, pyarrow and pandas (pip install 'rmqcli[spark]') and Java 17 or newer (on
PATH or in JAVA_HOME). On a cluster, every executor needs rmqcli installed in the Python it runs
(PYSPARK_PYTHON) and must see the store directories and --out under the same paths as the driver
(a shared filesystem; relative paths are the driver's); before a job, a short check job on every
executor makes sure of it and refuses, naming the path, when they do not (exit 2). A task that
fails is retried by Spark without a row written twice. Rebuild writes into the stores from the
driver. While jobs run, a progress line (tasks done / total) is shown on stderr when it is a
terminal.
"""

app = command_group("pipeline", HELP)


@dataclass(frozen=True)
class SparkCommon(Common):
    """``Common`` and the Spark master (``--master``)."""

    master: str | None = None


def _spark_output(
    master: MasterOpt = None,
    config: ConfigOpt = None,
    output: OutputOpt = OutputFormat.table,
    json_: JsonOpt = False,
) -> SparkCommon:
    return SparkCommon(resolve_format(output, json_), config, master)


spark_output = with_options(_spark_output)
"""``--master``, ``--config``, ``--output`` and ``--json`` after a job's own options."""


@contextmanager
def _session(
    job: str,
    stores: list[str],
    master: str | None,
    config: Path | None,
    *,
    urls: bool = False,
    rows: bool = False,
) -> Iterator[Any]:
    """The Spark session of ``rmq pipeline JOB``, once the stores are checked (``check_stores``)."""
    from rmqcli.pipeline.session import spark_session
    from rmqcli.pipeline.tasks import check_stores

    refs = check_stores(stores, config, urls=urls)
    if rows:  # the job's rows are records: say which are left out
        warn_unconfirmed(refs)
    with spark_session(master, f"rmq pipeline {job}") as session:
        yield session


def warn_unconfirmed(refs: list[Any]) -> None:
    """One warning per controller-mode store whose log holds records past confirmPhyOffset: the
    rows leave them out, as ``rmq dump-commitlog`` does."""
    for ref in refs:
        if ref.confirm_boundary is not None:
            warn(
                f"{ref.path}: records from offset {ref.confirm_boundary} are past the checkpoint's "
                "confirmPhyOffset: not confirmed by the in-sync replicas, not in the log; left out"
            )


def _render_item(item: dict[str, Any], json_: bool, title: str) -> None:
    Renderer(resolve_format(OutputFormat.table, json_)).item(item, title=title)


EXPORT_HELP = (
    "Export every CommitLog record of the stores as Parquet (or JSON lines), one row per record.\n\n"
    "A row holds exactly the fields `rmq dump-commitlog --output jsonl` prints for the record, plus "
    "the store it came from and the UTC date of its store time. Output goes to --out, partitioned by "
    f"{' and '.join(PARTITION_COLUMNS)} (directories topic=T/storeDate=YYYY-MM-DD; read them back "
    "with partition column type inference off, so that topic stays a string). In a controller-mode "
    "store, records past the checkpoint's confirmPhyOffset are not in the log: left out, as "
    "`rmq dump-commitlog` leaves them out, with a warning. Columns:\n\n" + schema_help()
)


@app.command("export", help=EXPORT_HELP)
def export(
    stores: UrlStoresArg,
    out: Annotated[str, typer.Option("--out", "-O", help="Output directory (or any URL Spark can write).")],
    format_: Annotated[
        ExportFormat, typer.Option("--format", help="parquet or jsonl.")
    ] = ExportFormat.parquet,
    topic: TopicsOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    body: Annotated[
        ExportBody, typer.Option("--body", help="No body column, the body as bytes (raw), or as UTF-8 text.")
    ] = ExportBody.none,
    overwrite: switch_option("--overwrite", help="Replace --out if it exists.") = False,
    master: MasterOpt = None,
    config: ConfigOpt = None,
    json_: JsonOpt = False,
) -> None:
    from rmqcli.pipeline.export import Selection, check_out
    from rmqcli.pipeline.export import export as run_export
    from rmqcli.pipeline.session import spark_session

    selection = Selection(frozenset(topic or ()), parse_time(since, "--since"), parse_time(until, "--until"))
    from rmqcli.pipeline.tasks import check_stores

    warn_unconfirmed(check_stores(stores, config, urls=True))
    check_out(out, overwrite)
    with spark_session(master, "rmq pipeline export") as session:
        result = run_export(
            session,
            stores,
            out,
            fmt=format_,
            selection=selection,
            body=body,
            config=config,
            overwrite=overwrite,
        )
    _render_item(result.to_dict(), json_, "export")


STATS_HELP = (
    "Statistics of many stores: what `rmq stats` shows, plus histograms.\n\n"
    "Per store, the sections of `rmq stats` (the same numbers), and per topic: the tag histogram "
    "(records per TAGS value), the property histogram (records carrying each property name) and "
    "record sizes (count, min, max, mean, p50, p90, p99 of TOTALSIZE)."
)


@app.command("stats", help=STATS_HELP)
@spark_output
def stats(
    stores: StoresArg,
    parquet: value_option(
        str, "--parquet", help="Also write the tables as Parquet under this directory (one per section)."
    ) = None,
    *,
    common: SparkCommon,
) -> None:
    from rmqcli.pipeline.stats import pipeline_stats, write_parquet

    with _session("stats", stores, common.master, common.config) as session:
        docs = [_stats_doc(result) for result in pipeline_stats(session, stores, config=common.config)]
        if parquet is not None:
            write_parquet(session, docs, parquet)
    if common.fmt is OutputFormat.json:
        import json

        sys.stdout.write(json.dumps({"stores": docs}, indent=2, ensure_ascii=False) + "\n")
        return
    common.renderer().sections(_stats_sections(docs))


def _stats_doc(result: Any) -> dict[str, Any]:
    """One store's document (a ``pipeline.stats`` result): the sections of `rmq stats` and the
    histograms; its unsafe topics are warned about on stderr."""
    from rmqcli.cli.render import camel_dict
    from rmqcli.cli.stats import commitlog_item, confirm_item, warn_unsafe

    doc = camel_dict(result.stats)
    out = {
        "store": {"store": doc["store"]},
        "commitlog": commitlog_item(doc["commitlog"]),
        "topics": doc["topics"],
        "queues": doc["queues"],
        "files": doc["files"],
        "tags": result.tags,
        "properties": result.properties,
        "sizes": result.sizes,
    }
    if doc["unsafeTopics"]:  # as in rmq stats: only when there are any
        out["unsafeTopics"] = doc["unsafeTopics"]
    warn_unsafe(doc["unsafeTopics"], doc["store"])
    if doc["confirm"] is not None:  # a controller-mode store, as in rmq stats
        out["confirm"] = confirm_item(doc["confirm"])
        out["unconfirmed"] = doc["confirm"]["queues"]
    return out


def _stats_sections(docs: list[dict[str, Any]]) -> list[Section]:
    """The tables of ``pipeline stats``: each of `rmq stats` and of the histograms, every store's
    rows in one table with the store first."""
    from rmqcli.cli.stats import (
        FILE_COLUMNS,
        QUEUE_COLUMNS,
        TOPIC_COLUMNS,
        UNCONFIRMED_COLUMNS,
        UNSAFE_COLUMNS,
        unsafe_section,
    )

    def rows(name: str) -> list[dict[str, Any]]:
        return [{"store": d["store"]["store"], **row} for d in docs for row in d.get(name, ())]

    def section(name: str, kind: str, columns: list[Column], title: str) -> Section:
        return Section(name, kind, rows=rows(name), columns=[STORE, *columns], title=title)

    commitlogs = [{"store": d["store"]["store"], **d["commitlog"]} for d in docs]
    unsafe = rows("unsafeTopics")
    return [
        Section(
            "commitlog", "commitlog", rows=commitlogs, columns=[STORE, *COMMITLOG_COLUMNS], title="CommitLog"
        ),
        section("topics", "topic", TOPIC_COLUMNS, "Topics"),
        section("queues", "queue", QUEUE_COLUMNS, "Queues"),
        section("sizes", "sizes", SIZE_COLUMNS, "Sizes"),
        section("tags", "tag", TAG_COLUMNS, "Tags"),
        section("properties", "property", PROPERTY_COLUMNS, "Properties"),
        section("files", "files", FILE_COLUMNS, "Files"),
        *([unsafe_section(unsafe, [STORE, *UNSAFE_COLUMNS])] if unsafe else []),
        *(
            [
                section(
                    "unconfirmed", "unconfirmed", UNCONFIRMED_COLUMNS, "Past confirmPhyOffset (not counted)"
                )
            ]
            if rows("unconfirmed")
            else []
        ),
    ]


COMMITLOG_COLUMNS = [
    number("files", "Files"),
    number("minOffset", "MinOffset"),
    number("maxOffset", "MaxOffset"),
    number("records", "Records"),
    BYTES,
    Column("firstStoreTimestampHuman", "FirstStored"),
    Column("lastStoreTimestampHuman", "LastStored"),
]
SIZE_COLUMNS = [
    TOPIC,
    MESSAGES,
    *(
        number(k, k.capitalize() if len(k) > 3 else k.upper())
        for k in ("min", "p50", "p90", "p99", "max", "mean")
    ),
]


def _histogram(key: str, header: str) -> list[Column]:
    """The columns of a histogram: per topic, the records of each value of ``key``."""
    return [TOPIC, Column(key, header), MESSAGES]


TAG_COLUMNS = _histogram("tag", "Tag")
PROPERTY_COLUMNS = _histogram("property", "Property")
SEARCH_COLUMNS = [STORE, POSITION, TOPIC, QUEUE_ID, QUEUE_OFFSET, TAGS, RECORD_KEYS, UNIQ_KEY, MSG_ID]


SEARCH_HELP = """Find messages across stores by scanning their CommitLogs (no index needed).

Give at least one of --key, --uniq-key, --property, --body-regex; a record must match all that are
given. Rows are those of `rmq dump-commitlog` with the store they came from, in store and CommitLog
order (in a controller-mode store, not the records past confirmPhyOffset: a warning says so)."""


LAG_HELP = (
    "`rmq lag` for many stores, one Spark task per store: per store, consumer group, topic and queue "
    "the broker and consumer offsets, the diff, the queue's min offset, the store times of the last "
    "consumed and the oldest unconsumed message, and the below-min / past-max flags. In a "
    "controller-mode store the broker offset counts only units whose records are within the "
    "checkpoint's confirmPhyOffset; the units past it are counted per row (unconfirmed) and warned about."
)


@app.command("lag", help=LAG_HELP)
@spark_output
def lag(
    stores: StoresArg,
    group: LagGroupOpt = None,
    topic: LagTopicOpt = None,
    *,
    common: SparkCommon,
) -> None:
    from rmqcli.cli.reports import LAG_COLUMNS, lag_display, warn_lag_unconfirmed
    from rmqcli.pipeline.lag import pipeline_lag

    with _session("lag", stores, common.master, common.config) as session:
        rows = pipeline_lag(session, stores, config=common.config, group=group, topic=topic)
    warn_lag_unconfirmed(rows)
    renderer = common.renderer()
    if renderer.fmt is OutputFormat.table:
        rows = [lag_display(row) for row in rows]
    renderer.rows(rows, [STORE, *LAG_COLUMNS])


@app.command("search", help=SEARCH_HELP)
@spark_output
def search(
    stores: UrlStoresArg,
    key: key_option("Records with this key among their KEYS.") = None,
    uniq_key: value_option(
        str, "--uniq-key", "-i", help="Records with this UNIQ_KEY (the client's message id)."
    ) = None,
    prop: value_option(
        list[str],
        "--property",
        "-p",
        metavar="NAME=VALUE",
        help="Records with this property value (repeatable).",
    ) = None,
    body_regex: value_option(
        str, "--body-regex", help="Records whose body (UTF-8 text, inflated) matches this Python regex."
    ) = None,
    topic: TopicsOpt = None,
    body: BodyOpt = BodyChoice.none,
    *,
    common: SparkCommon,
) -> None:
    from rmqcli.pipeline.search import Query, parse_property
    from rmqcli.pipeline.search import search as run_search

    query = Query(
        key, uniq_key, tuple(parse_property(p) for p in prop or ()), body_regex, frozenset(topic or ())
    )
    with _session("search", stores, common.master, common.config, urls=True, rows=True) as session:
        rows = run_search(session, stores, query, body=body.value, config=common.config)
    common.renderer().rows(rows, [*SEARCH_COLUMNS, *body_columns(body.value)])


REBUILD_HELP = """`rmq rebuild` for many stores: CommitLogs decoded on Spark, queues and index written.

With neither --cq nor --index both are rebuilt (with --topic: that topic's consume queues). The
files are byte for byte those `rmq rebuild` writes, and the change is made the same way: a plan per
store unless --yes; refused while a broker holds a store's lock (exit 7); old files backed up under
STORE/.rmq-backup/; new files staged inside the store and renamed into place; fsynced. The driver
writes the stores, so it must see them as directories."""


@app.command("rebuild", help=REBUILD_HELP)
def rebuild(
    stores: StoresArg,
    cq: RebuildCqOpt = False,
    index: RebuildIndexOpt = False,
    topic: RebuildTopicOpt = None,
    master: MasterOpt = None,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    force_unlocked: ForceUnlockedOpt = False,
    json_: switch_option(
        "--json", help="Print each store's plan as one JSON document (a line each)."
    ) = False,
) -> None:
    from rmqcli.cli.plan import print_plan
    from rmqcli.pipeline.rebuild import check_options, pipeline_rebuild

    apply = confirm(dry_run, yes)
    queues, indexes = rebuild_targets(cq, index, topic)
    renderer = Renderer(OutputFormat.jsonl if json_ else resolve_format(OutputFormat.table, False))

    def report(plan, applied, backup) -> None:  # type: ignore[no-untyped-def]
        print_plan(renderer, plan, applied=applied, backup=backup)

    check_options(queues, indexes, topic)
    with _session("rebuild", stores, master, config) as session:
        pipeline_rebuild(
            session,
            stores,
            report,
            consume_queues=queues,
            index=indexes,
            topic=topic,
            apply=apply,
            force_unlocked=force_unlocked,
            argv=sys.argv[1:],
            config=config,
        )


# The man pages are generated one level deep (rmq-pipeline.1): the group's help carries each
# command's full help, the export schema included.
app.info.help = "\n\n".join(
    [
        HELP.strip(),
        "rmq pipeline export: " + EXPORT_HELP,
        "rmq pipeline stats: " + STATS_HELP,
        "rmq pipeline search: " + SEARCH_HELP,
        "rmq pipeline rebuild: " + REBUILD_HELP,
    ]
)
