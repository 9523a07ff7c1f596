"""``rmq dashboard``'s store inspector in a real headless Chromium: each store page loads with no
console error and shows the numbers ``rmq stats``, ``lag``, ``delay-report`` and ``verify`` print
with ``--json`` for the same store (the endpoints answer the very same text); a store not given
(another path, ``..``, a symlink out, an index past the list) is refused on the page and with 403;
a corrupt CommitLog record is the CLI's one line (file and byte offset) on the page and with 422."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_rmq
from tests.support.dashboard import SHOTS, Browser, Dashboard, browser, dashboard
from tests.support.realfixtures import variants
from tests.support.serve import wait_until
from tests.support.stores import sparse_copy

pytestmark = pytest.mark.browser
COMMANDS = {"stats": "stats", "verify": "verify", "lag": "lag", "delay": "delay-report", "tx": "tx-report"}


@dataclass
class Stores:
    good: Path
    corrupt: Path
    corrupt_at: int  # the offset in the first CommitLog file of the record whose magic code is bad
    outside: Path  # a store directory rmq dashboard was not given
    escape: Path  # a symlink to ``outside``


@pytest.fixture(scope="module")
def stores(pristine: Path, tmp_path_factory: pytest.TempPathFactory) -> Stores:
    tmp = tmp_path_factory.mktemp("dash-store")
    corrupt = tmp / "corrupt"
    shutil.copytree(pristine, corrupt, copy_function=sparse_copy)
    first = sorted((corrupt / "commitlog").iterdir())[0]
    with open(first, "r+b") as handle:
        at = int.from_bytes(handle.read(4), "big")  # the second record, after the first's size
        handle.seek(at + 4)
        handle.write(b"\x00\x00\x00\x01")
    outside = tmp / "outside"
    shutil.copytree(pristine, outside, copy_function=sparse_copy)
    escape = tmp / "escape"
    escape.symlink_to(outside, target_is_directory=True)
    return Stores(pristine.resolve(), corrupt.resolve(), at, outside.resolve(), escape)


@pytest.fixture(scope="module")
def dash(stores: Stores) -> Iterator[Dashboard]:
    with dashboard("--store", str(stores.good), "--store", str(stores.corrupt)) as d:
        yield d


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as b:
        yield b


def cli_json(d: Dashboard, index: int, report: str, *args: str) -> Any:
    """The document ``rmq <report's command> STORE ARGS --json`` prints, after checking that the
    endpoint of ``report`` answers the very same text."""
    store = d.get("/api/stores")[1][index]["path"]
    proc = run_rmq(COMMANDS[report], store, *args, "--json")
    assert proc.returncode in (0, 4), proc.stderr  # 4: verify found errors
    query = "?max_problems=" + args[1] if args else ""
    assert text_of(d, f"/api/store/{index}/{report}{query}") == proc.stdout, report
    return json.loads(proc.stdout)


def opened(b: Browser, d: Dashboard, path: str, shot: str, state: str = "ready", status: int = 0) -> None:
    """Load the page; no console error but Chromium's line for an answer of ``status`` (an
    endpoint's refusal the page shows), which it logs for every such fetch."""
    b.open(d, path, shot=shot, state=state)
    failed = f"the server responded with a status of {status} "
    assert [e for e in b.console_errors() if not (status and failed in e)] == []


def numeric(cells: dict[str, str], prefix: str, rows: list[dict], key: Any) -> None:
    """Every number of ``rows`` is the text of the cell ``prefix/key(row)/field``."""
    expected = {f"{prefix}/{key(r)}/{f}": str(v) for r in rows for f, v in r.items() if type(v) is int}
    assert expected, prefix
    assert {k: cells.get(k) for k in expected} == expected


def check_store_page(b: Browser, d: Dashboard, index: int, store: Path, shot: str) -> None:
    opened(b, d, f"/store/{index}", shot)
    cells = b.cells()
    stats = cli_json(d, index, "stats")
    numeric(cells, "stats", [stats["commitlog"]], lambda _r: "commitlog")
    numeric(cells, "stats/topic", stats["topics"], lambda r: r["topic"])
    numeric(cells, "stats/queue", stats["queues"], lambda r: f"{r['topic']}/{r['queueId']}")
    numeric(cells, "stats/files", stats["files"], lambda r: r["kind"])
    lag = cli_json(d, index, "lag")
    if lag:
        numeric(cells, "lag", lag, lambda r: f"{r['group']}/{r['topic']}/{r['queueId']}")
    numeric(cells, "delay", cli_json(d, index, "delay"), lambda r: r["level"])
    # the files listing: what is on disk
    logs = sorted((store / "commitlog").iterdir())
    assert cells["files/commitlog/count"] == str(len(logs))
    assert cells["files/commitlog/bytes"] == str(sum(p.stat().st_size for p in logs))
    for log in logs:
        assert cells[f"files/commitlog/{log.name}/bytes"] == str(log.stat().st_size)
    queue_files = [p for p in (store / "consumequeue").glob("*/*/*") if p.is_file()]
    assert cells["files/consumequeue/count"] == str(len(queue_files))

    b.driver.find_element("id", "verify-run").click()
    result = b.driver.find_element("id", "verify-result")
    assert wait_until(lambda: result.get_attribute("data-state"), 300, "verify") == "done", b.error_text()
    verify = cli_json(d, index, "verify", "--max-problems", "1000")
    numeric(b.cells("verify/summary"), "verify", [verify["summary"]], lambda _r: "summary")
    assert "null" not in result.text and "undefined" not in result.text
    b.driver.execute_script("arguments[0].scrollIntoView()", result)
    b.driver.save_screenshot(str(SHOTS / f"{shot}-verified.png"))
    assert b.console_errors() == []


def test_the_store_pages_show_what_the_cli_prints(dash: Dashboard, stores: Stores, chromium: Browser) -> None:
    opened(chromium, dash, "/store", "store-list")
    assert chromium.cells() == {"store/0": str(stores.good), "store/1": str(stores.corrupt)}
    check_store_page(chromium, dash, 0, stores.good, "store-generated")
    assert cli_json(dash, 0, "tx") == []  # none open here (an open one's age would differ)
    status, doc = dash.get(f"/api/store/stats?store={stores.good}/commitlog/..")
    assert status == 200 and doc["commitlog"]["records"] > 0  # the same directory, spelt otherwise


@pytest.mark.real
def test_a_real_store_page_shows_what_the_cli_prints(chromium: Browser) -> None:
    store = variants()[0].store.resolve()
    with dashboard("--store", str(store)) as d:
        check_store_page(chromium, d, 0, store, "store-real")


def test_a_store_not_given_is_refused(dash: Dashboard, stores: Stores, chromium: Browser) -> None:
    allowed = f"allowed: 0: {stores.good}; 1: {stores.corrupt}"
    for ref in (str(stores.outside), str(stores.escape), f"{stores.good}/..", "/", "2", "..", "store", "0 "):
        status, doc = dash.get(f"/api/store/stats?store={quote(ref)}")
        assert (status, doc) == (403, {"error": f"{ref!r} is not a store given to rmq dashboard; {allowed}"})
    assert dash.get("/api/store/7/files") == (
        403, {"error": f"'7' is not a store given to rmq dashboard; {allowed}"}
    )  # fmt: skip
    opened(chromium, dash, f"/store/{quote(str(stores.escape))}", "store-refused", state="error", status=403)
    assert chromium.error_text() == f"{str(stores.escape)!r} is not a store given to rmq dashboard; {allowed}"
    assert chromium.cells() == {}


def test_a_corrupt_store_is_one_line(dash: Dashboard, stores: Stores, chromium: Browser) -> None:
    proc = run_rmq("stats", str(stores.corrupt), "--json")
    assert proc.returncode == 4 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    first = sorted((stores.corrupt / "commitlog").iterdir())[0]
    assert line == f"rmq: error: {first} at byte {stores.corrupt_at}: illegal magic code 0x00000001"
    message = line.removeprefix("rmq: error: ")
    assert dash.get("/api/store/1/stats") == (422, {"error": message})
    opened(chromium, dash, "/store/1", "store-corrupt", status=422)
    assert chromium.error_text() == message
    box = chromium.driver.find_element("css selector", '[data-error="stats"]')
    assert box.text == message
    # the other reports still show (they read no CommitLog record there), and verify names the spot
    assert chromium.cells("files/commitlog/count") == {"files/commitlog/count": "3"}
    status, doc = dash.get("/api/store/1/verify")
    assert status == 200 and doc["summary"]["errors"] > 0
    assert any(p["file"].endswith(first.name) for p in doc["problems"])


def quote(text: str) -> str:
    from urllib.parse import quote as q

    return q(text, safe="")


def text_of(d: Dashboard, path: str) -> str:
    """The text of a GET of ``path`` (status 200)."""
    import urllib.request

    with urllib.request.urlopen(d.url + path, timeout=60) as answer:
        assert answer.status == 200
        return answer.read().decode()
