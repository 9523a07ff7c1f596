"""The columns of ``rmq pipeline export`` and their Arrow and Spark types, declared once.

The names are the keys of ``rmqcli.ops.records.record_fields`` (the rows of ``rmq dump-commitlog``)
with the log's own framing (``record_extra``: a DLedger entry's index, term and pos), plus ``store``
and ``storeDate``. Kept free of heavy imports: the CLI help is built from it.
"""

from __future__ import annotations

from enum import StrEnum

PARTITION_COLUMNS = ("topic", "storeDate")


class ExportBody(StrEnum):
    """``--body``: no body, the body bytes (inflated when compressed), or the body as UTF-8 text."""

    none = "none"
    raw = "raw"
    text = "text"


class ExportFormat(StrEnum):
    parquet = "parquet"
    jsonl = "jsonl"


# The columns of an exported row, in order, with their type (the keys of ``record_fields``).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("store", "string", "the store directory the record was read from (absolute path)"),
    ("file", "string", "CommitLog file name (the 20-digit offset of its first byte)"),
    ("filePos", "long", "byte position of the record in its file"),
    ("position", "long", "physical offset where the record was read"),
    ("totalSize", "int", "TOTALSIZE"),
    ("magicCode", "int", "MAGICCODE (V1 or V2)"),
    ("magicCodeHex", "string", "MAGICCODE as 0x hex"),
    ("bodyCRC", "int", "BODYCRC as stored"),
    ("queueId", "int", "QUEUEID"),
    ("flag", "int", "FLAG"),
    ("queueOffset", "long", "QUEUEOFFSET"),
    ("physicalOffset", "long", "PHYSICALOFFSET field"),
    ("sysFlag", "int", "SYSFLAG"),
    ("bornTimestamp", "long", "BORNTIMESTAMP (epoch ms)"),
    ("bornHost", "string", "BORNHOST as ip:port"),
    ("bornHostBytesHex", "string", "BORNHOST address bytes in hex"),
    ("storeTimestamp", "long", "STORETIMESTAMP (epoch ms)"),
    ("storeHost", "string", "STOREHOST as ip:port (the broker's identity)"),
    ("storeHostBytesHex", "string", "STOREHOST address bytes in hex"),
    ("reconsumeTimes", "int", "RECONSUMETIMES"),
    ("preparedTransactionOffset", "long", "PREPAREDTRANSACTIONOFFSET"),
    ("topic", "string", "TOPIC (a partition column)"),
    ("topicLength", "int", "topic length in bytes"),
    ("properties", "map", "the decoded properties (name -> value)"),
    ("propertiesLength", "int", "PROPERTIESLENGTH"),
    ("bodyOffsetInRecord", "int", "where the body starts within the record"),
    ("offsetMsgId", "string", "the broker's message id (store host + physical offset)"),
    ("uniqKey", "string", "UNIQ_KEY property (the client's message id)"),
    ("tags", "string", "TAGS property"),
    ("keys", "list", "KEYS property split on spaces"),
    ("bodyLength", "int", "BODYLENGTH (as stored)"),
    ("computedBodyCRC", "int", "CRC32 of the stored body, masked to 31 bits"),
    ("crcOk", "bool", "whether computedBodyCRC equals bodyCRC"),
    ("compressed", "bool", "whether the compressed flag is set"),
    ("compressionType", "string", "ZLIB, ZSTD or LZ4 when compressed, else null"),
    ("transactionType", "string", "NOT_TYPE, PREPARED_TYPE, COMMIT_TYPE or ROLLBACK_TYPE"),
    ("cqTagsCode", "long", "the tags code the broker's dispatch writes to the consume queue"),
    ("decompressedLength", "int", "body length after inflating (compressed records, with --body)"),
    ("entryIndex", "long", "DLedger CommitLog store: the index of the entry holding the record, else null"),
    ("entryTerm", "long", "DLedger CommitLog store: the term of that entry, else null"),
    ("entryPos", "long", "DLedger CommitLog store: that entry's pos (position - 48), else null"),
    ("storeDate", "string", "UTC date of storeTimestamp, YYYY-MM-DD (a partition column)"),
)
BODY_COLUMN = {
    ExportBody.raw: ("body", "binary", "the body bytes (inflated when compressed); --body raw"),
    ExportBody.text: ("body", "string", "the body as UTF-8 text (inflated when compressed); --body text"),
}


def columns(body: ExportBody) -> list[tuple[str, str, str]]:
    extra = BODY_COLUMN.get(body)
    return [*COLUMNS, extra] if extra else list(COLUMNS)


def schema_help() -> str:
    """The column list for the command's help (and so its man page)."""
    lines = [f"{name} ({kind}): {text}" for name, kind, text in [*COLUMNS, *BODY_COLUMN.values()]]
    return "\n\n".join(lines)


def arrow_schema(body: ExportBody):  # type: ignore[no-untyped-def]
    """The Arrow schema of the exported rows: ``COLUMNS`` (and the body column) in order."""
    import pyarrow as pa

    kinds = {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "bool": pa.bool_(),
        "binary": pa.binary(),
        "map": pa.map_(pa.string(), pa.string()),
        "list": pa.list_(pa.string()),
    }
    return pa.schema([pa.field(name, kinds[kind]) for name, kind, _ in columns(body)])


def spark_schema(body: ExportBody):  # type: ignore[no-untyped-def]
    """The Spark form of ``arrow_schema``, by PySpark's own Arrow type mapping (the one
    ``mapInArrow`` applies to the batches export writes), so the two cannot disagree."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(body))
