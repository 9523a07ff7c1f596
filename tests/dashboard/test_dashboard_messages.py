"""``rmq dashboard``'s Messages page in a real headless Chromium, over ``rmq serve`` holding messages
sent by the real C++ client (and one binary body by rmq's own producer): a search by topic and
time range shows what ``rmq printMsg --json`` reads, and a range holding more than ``limit``
answers exactly ``limit`` with ``truncated`` and says so on the page; the look-ups by key and by id
show what ``rmq queryMsgByKey`` / ``queryMsgById --json`` print, with bodies and properties; a
garbage id is one line on the page and from the endpoint. Every page loads without a console error."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.support.broker_drivers import run_driver
from tests.support.cli import rmq_json
from tests.support.dashboard import Browser, Dashboard, browser, dashboard
from tests.support.serve import ServeProcess, write_conf

pytestmark = [pytest.mark.browser, pytest.mark.cpp]
TOPIC = "TopicMsgs"
SENT = 40  # by the C++ client: keys m0..m36, and "dup" three times
BINARY = bytes(range(256)) * 2  # not UTF-8
FAR = 4102444800000  # 2100-01-01


@dataclass
class Cluster:
    ns: str
    binary_id: str  # the unique key of the binary message


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from rmqcli.admin.message import OutMessage, Producer
    from rmqcli.admin.session import AdminSession

    tmp = tmp_path_factory.mktemp("dashmsg")
    with ServeProcess(tmp / "store", write_conf(tmp / "broker.conf")) as served:
        keys = [f"m{i}" for i in range(SENT - 3)] + ["dup"] * 3
        cmd = {"op": "produce", "namesrv": served.namesrv, "topic": TOPIC, "keys": keys}
        run_driver(tmp, "produce", cmd)
        with AdminSession([served.namesrv]) as session:
            producer = Producer(session, "PG_BINARY")
            try:
                sent = producer.send(OutMessage(topic=TOPIC, body=BINARY, keys="bin", tags="B"))
            finally:
                producer.close()
        yield Cluster(served.namesrv, sent.msg_id)


@pytest.fixture(scope="module")
def dash(cluster: Cluster) -> Iterator[Dashboard]:
    with dashboard("-n", cluster.ns) as d:
        yield d


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as b:
        yield b


def page(**options: Any) -> str:
    """The page's address for ``options`` (as its forms write it)."""
    return "/messages/" + quote(urlencode(options), safe="")


def opened(b: Browser, dash: Dashboard, path: str, shot: str) -> None:
    b.open(dash, path, shot=shot)
    assert b.console_errors() == []


def shown(m: dict[str, Any], field: str) -> str:
    value = m[field]
    return "" if value is None else str(value)


def test_search_by_time_shows_what_printmsg_reads(
    cluster: Cluster, dash: Dashboard, chromium: Browser
) -> None:
    opened(chromium, dash, page(topic=TOPIC, begin=0, end=FAR, limit=512), "messages-by-time")
    events = rmq_json("printMsg", "-n", cluster.ns, "-t", TOPIC, "--json")
    printed = {m["offsetMsgId"]: m for e in events for m in e.get("messages", [])}  # type: ignore[union-attr]
    assert len(printed) == SENT + 1
    cells = chromium.cells("list/")
    assert {k.split("/")[1] for k in cells} == set(printed)
    for offset_id, m in printed.items():
        for field in ("msgId", "queueId", "queueOffset", "keys", "tags", "bornHost"):
            assert cells[f"list/{offset_id}/{field}"] == shown(m, field), (offset_id, field)
        size = len(BINARY) if m["keys"] == "bin" else len(m["body"].encode())
        assert cells[f"list/{offset_id}/bodySize"] == str(size)
    assert chromium.cells("search/") == {"search/count": str(SENT + 1), "search/truncated": "false"}

    # a range that ends before the first message holds none
    status, doc = dash.get(f"/api/messages?topic={TOPIC}&begin=0&end=1")
    assert status == 200 and doc["messages"] == [] and doc["truncated"] is False


def test_huge_range_answers_the_limit_and_says_so(
    cluster: Cluster, dash: Dashboard, chromium: Browser
) -> None:
    status, doc = dash.get(f"/api/messages?topic={TOPIC}&begin=0&end={FAR}&limit=16")
    assert status == 200, doc
    assert len(doc["messages"]) == 16 and doc["truncated"] is True and doc["unread"] == SENT + 1 - 16
    assert len({m["offsetMsgId"] for m in doc["messages"]}) == 16
    # each of the 4 queues (10 or 11 messages each) read in turns: its oldest 4, no further
    assert sorted(m["queueId"] for m in doc["messages"]) == [q for q in range(4) for _ in range(4)]
    assert all(q["nextOffset"] == q["beginOffset"] + 4 for q in doc["queues"]), doc["queues"]
    opened(chromium, dash, page(topic=TOPIC, begin=0, end=FAR, limit=16), "messages-truncated")
    assert chromium.cells("search/") == {"search/count": "16", "search/truncated": "true"}
    note = chromium.driver.find_element("id", "truncated").text
    assert f"about {SENT + 1 - 16} more" in note and "Narrow the time range" in note
    for bad, line in (("limit=0", "limit: between 1 and 512"), ("limit=513", "limit: between 1 and 512")):
        status, doc = dash.get(f"/api/messages?topic={TOPIC}&{bad}")
        assert status == 400 and doc["error"].startswith(line), doc


def test_by_key_shows_what_querymsgbykey_prints(cluster: Cluster, dash: Dashboard, chromium: Browser) -> None:
    opened(chromium, dash, page(topic=TOPIC, key="dup"), "messages-by-key")
    printed = rmq_json("queryMsgByKey", "-n", cluster.ns, "-t", TOPIC, "-k", "dup", "--json")
    assert isinstance(printed, list) and len(printed) == 3
    cells = chromium.cells()
    assert cells["key/count"] == "3"
    for m in printed:
        oid = m["offsetMsgId"]
        for field in ("msgId", "queueId", "queueOffset", "tags", "keys"):
            assert cells[f"list/{oid}/{field}"] == shown(m, field)
            assert cells[f"msg/{oid}/{field}"] == shown(m, field)
        for field in ("commitLogOffset", "storeTimestamp", "bornHost", "storeHost", "bodyCRC", "sysFlag"):
            assert cells[f"msg/{oid}/{field}"] == shown(m, field)
        assert {k.split("/", 2)[2]: v for k, v in cells.items() if k.startswith(f"prop/{oid}/")} == m[
            "properties"
        ]
        assert cells[f"body/{oid}"] == m["body"] == "body-dup"


def test_by_id_shows_what_querymsgbyid_prints(cluster: Cluster, dash: Dashboard, chromium: Browser) -> None:
    # the binary message by its unique key: body as base64 and hex
    opened(chromium, dash, page(id=cluster.binary_id, topic=TOPIC), "messages-by-id-binary")
    [view] = rmq_json("queryMsgById", "-n", cluster.ns, "-i", cluster.binary_id, "-t", TOPIC, "--json")  # type: ignore[misc]
    m = view["message"]
    oid = m["offsetMsgId"]
    cells = chromium.cells()
    for field in ("msgId", "offsetMsgId", "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize",
                  "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "keys", "tags"):  # fmt: skip
        assert cells[f"msg/{oid}/{field}"] == shown(m, field), field
    assert {k.split("/", 2)[2]: v for k, v in cells.items() if k.startswith(f"prop/{oid}/")} == m[
        "properties"
    ]
    assert base64.b64decode(cells[f"body/{oid}"]) == BINARY
    assert cells[f"hex/{oid}"].split()[:3] == ["00", "01", "02"]
    assert "TOPIC_NOT_EXIST" in chromium.driver.find_element("id", "trace-note").text  # no trace topic

    # a text message by its offset id, as the search table links it
    [view] = rmq_json("queryMsgByKey", "-n", cluster.ns, "-t", TOPIC, "-k", "m7", "--json")  # type: ignore[misc]
    oid = view["offsetMsgId"]
    opened(chromium, dash, page(id=oid, topic=TOPIC), "messages-by-offset-id")
    [by_id] = rmq_json("queryMsgById", "-n", cluster.ns, "-i", oid, "--json")  # type: ignore[misc]
    cells = chromium.cells()
    assert cells[f"msg/{oid}/msgId"] == by_id["message"]["msgId"] == view["msgId"]
    assert cells[f"body/{oid}"] == by_id["message"]["body"] == "body-m7"


def test_garbage_id_is_one_line(dash: Dashboard, chromium: Browser) -> None:
    status, doc = dash.get("/api/admin/queryMsgById?msg_id=not-an-id")
    assert status == 404 and "\n" not in doc["error"] and "not found" in doc["error"], doc
    status, doc = dash.get("/api/messages/body?offset_msg_id=not-an-id")
    assert status == 400 and "not an offset message id" in doc["error"], doc
    line = dash.get("/api/admin/queryMsgById?msg_id=not-an-id")[1]["error"]
    chromium.open(dash, page(id="not-an-id"), shot="messages-garbage-id")
    assert chromium.error_text() == line  # one line, no traceback
    assert chromium.driver.find_element("id", "lookup-error").text == line
    assert chromium.driver.find_element("id", "search-id").is_displayed()  # kept to correct the id
    # the browser reports the refused request itself (a 404), and nothing else
    assert [e for e in chromium.console_errors() if "404" not in e] == []
