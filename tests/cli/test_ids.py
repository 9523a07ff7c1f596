"""``rmq msgid decode`` and ``rmq offset`` on the ids a real 4.9.8 broker and Java client wrote."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import invoke_rmq
from tests.support.realfixtures import variant_params


def run(*args: str) -> list[dict]:
    result = invoke_rmq(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("variant", variant_params())
def test_offset_ids_and_unique_keys_of_a_real_store_decode_to_what_the_records_hold(variant) -> None:
    records = variant.records[:: max(1, len(variant.records) // 200)]
    conf = variant.scenario / "broker.conf"  # the store's mappedFileSizeCommitLog
    docs = run("msgid", "decode", *(r["offsetMsgId"] for r in records), "--config", str(conf))
    for record, doc in zip(records, docs, strict=True):
        assert doc["offsetId"]["offset"] == record["physicalOffset"]
        assert doc["offsetId"]["storeHost"] == record["storeHost"]
        assert (doc["offsetId"]["file"], doc["offsetId"]["position"]) == (record["file"], record["filePos"])
    keyed = [r for r in records if "UNIQ_KEY" in r["properties"]]
    assert keyed
    later = str(max(r["bornTimestamp"] for r in keyed) + 60_000)
    docs = run("msgid", "decode", *(r["properties"]["UNIQ_KEY"] for r in keyed), "--now", later)
    for record, doc in zip(keyed, docs, strict=True):
        # the client made the key when it sent the message; its counter grows, one per message
        assert abs(doc["uniqueKey"]["timestamp"] - record["bornTimestamp"]) < 5_000
    by_client = {}
    for doc in docs:
        key = doc["uniqueKey"]
        by_client.setdefault((key["clientIp"], key["pid"], key["classLoaderHash"]), []).append(key)
    for keys in by_client.values():
        stamps = [(k["timestamp"], k["counter"]) for k in keys]
        assert [c for _, c in sorted(stamps)] == sorted(c for _, c in stamps) or len(keys) > 65535


def test_offsets_and_files_go_both_ways() -> None:
    rows = run("offset", "1073742827", "00000000001073741824:1003", "/data/commitlog/00000000001073741824")
    assert rows == [
        {"offset": 1073742827, "file": "00000000001073741824", "position": 1003},
        {"offset": 1073742827, "file": "00000000001073741824", "position": 1003},
        {"offset": 1073741824, "file": "00000000001073741824", "position": 0},
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["msgid", "decode", "XYZ"], "'XYZ' is not a message id (32 or 56 hex digits)"),
        (
            ["offset", "00000000001073741825"],
            "00000000001073741825 is not a CommitLog file name for 1073741824-byte files",
        ),
        (
            ["offset", "00000000001073741824:2000000000"],
            "position 2000000000 is outside a 1073741824-byte file",
        ),
        (["offset", "ten"], "'ten' is neither an offset nor a CommitLog file name (20 digits)"),
    ],
)
def test_bad_ids_and_offsets_are_one_line_usage_errors(args: list[str], message: str) -> None:
    result = invoke_rmq(*args)
    assert result.exit_code == 2 and result.stderr.strip() == f"rmq: error: {message}"
