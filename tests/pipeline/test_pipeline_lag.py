"""``rmq pipeline lag``: per store, the rows ``rmq lag`` gives, on real Spark."""

from __future__ import annotations

import contextlib
import io
import json

from rmqcli.cli.main import invoke
from tests.support.cli import rmq_json


def test_equals_rmq_lag_for_every_store(spark, all_stores) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = invoke(["pipeline", "lag", *map(str, all_stores), "--json"])
    assert code == 0
    rows = json.loads(out.getvalue())
    expected = []
    for store in all_stores:
        expected += [{"store": str(store.resolve()), **row} for row in rmq_json("lag", str(store), "--json")]
    assert rows == expected
    assert any(row["diff"] > 0 for row in rows)  # the real stores' GroupB is behind


def test_one_group_across_the_fleet(spark, all_stores) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = invoke(["pipeline", "lag", *map(str, all_stores), "-g", "GroupA", "--json"])
    assert code == 0
    rows = json.loads(out.getvalue())
    assert rows and {row["group"] for row in rows} == {"GroupA"}
