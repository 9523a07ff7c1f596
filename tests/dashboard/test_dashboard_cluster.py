"""``rmq dashboard``'s cluster pages in a real headless Chromium, over ``rmq serve`` under the real
C++ client: each page loads with no console error and shows what ``rmq <command> --json`` prints
for the same cluster; the lag chart grows while a consumer is stopped and falls when it resumes;
writes are refused without ``--allow-writes`` and, with it, show their command and run only once
confirmed; bad input is one line on the page and from the endpoint."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_drivers import Driver, run_driver, warmed_consumer
from tests.support.cli import one_line_error, rmq_json, run_rmq
from tests.support.dashboard import Browser, Dashboard, browser, dashboard
from tests.support.ports import claim
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.browser, pytest.mark.cpp]
TOPIC, GROUP = "TopicD", "CG_D"
READ_ONLY = "read-only: rmq dashboard was started without --allow-writes"


class Cluster:
    def __init__(self, served: ServeProcess, consumer: Driver, tmp: Path):
        self.served, self.consumer, self.tmp = served, consumer, tmp
        self.ns = served.namesrv

    def produce(self, count: int, prefix: str) -> None:
        keys = [f"{prefix}{i}" for i in range(count)]
        run_driver(
            self.tmp, f"produce-{prefix}", {"op": "produce", "namesrv": self.ns, "topic": TOPIC, "keys": keys}
        )

    def diff_total(self) -> int:
        progress = rmq_json("consumerProgress", "-n", self.ns, "-g", GROUP, "--json")
        return progress["diffTotal"]  # type: ignore[index]

    def settled(self) -> None:
        """Every message consumed and its offset committed (the client commits every 5 s)."""
        wait_until(lambda: self.diff_total() == 0, 60, "the consumer's offsets committed")

    def sent(self) -> int:
        status = rmq_json("topicStatus", "-n", self.ns, "-t", TOPIC, "--json")
        return sum(q["maxOffset"] for q in status)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("dash")
    with ServeProcess(tmp / "store", write_conf(tmp / "broker.conf")) as served:
        consumer = warmed_consumer(tmp, served.namesrv, TOPIC, GROUP)
        try:
            found = Cluster(served, consumer, tmp)
            found.produce(10, "a")
            found.settled()
            yield found
        finally:
            consumer.stop()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as b:
        yield b


def opened(b: Browser, dash: Dashboard, path: str, shot: str) -> Any:
    page = b.open(dash, path, shot=shot)
    assert b.console_errors() == []
    return page


def test_each_page_shows_what_the_cli_prints(cluster: Cluster, chromium: Browser) -> None:
    ns = cluster.ns
    with dashboard("-n", ns) as dash:
        before = rmq_json("clusterList", "-n", ns, "--json")
        opened(chromium, dash, "/cluster", "cluster")
        after = rmq_json("clusterList", "-n", ns, "--json")
        for row, later in zip(before, after, strict=True):  # type: ignore[arg-type]
            prefix = f"{row['brokerName']}/{row['brokerId']}/"
            assert chromium.cell(prefix + "commitLogMaxOffset") == row["runtime"]["commitLogMaxOffset"]
            # The disk is shared with whatever else runs: the page's ratio lies between the two reads.
            ratios = sorted(float(r["runtime"]["commitLogDiskRatio"]) for r in (row, later))
            assert ratios[0] <= float(chromium.cell(prefix + "commitLogDiskRatio")) <= ratios[1]
        assert "acting master: no" in chromium.driver.page_source

        opened(chromium, dash, "/topics", "topics")
        assert set(chromium.cells()) == set(rmq_json("topicList", "-n", ns, "--json"))  # type: ignore[arg-type]

        opened(chromium, dash, f"/topic/{TOPIC}", "topic")
        status = rmq_json("topicStatus", "-n", ns, "-t", TOPIC, "--json")
        assert {k: int(v) for k, v in chromium.cells().items() if k.endswith("maxOffset")} == {
            f"{q['brokerName']}/{q['queueId']}/maxOffset": q["maxOffset"]
            for q in status  # type: ignore[union-attr]
        }
        route = rmq_json("topicRoute", "-n", ns, "-t", TOPIC, "--json")
        for q in route["queueDatas"]:  # type: ignore[index]
            assert chromium.cell(f"{q['brokerName']}/writeQueueNums") == str(q["writeQueueNums"])

        opened(chromium, dash, "/consumers", "consumers")
        groups = rmq_json("consumerProgress", "-n", ns, "--json")
        mine = [g for g in groups if g["group"] == GROUP]  # type: ignore[union-attr]
        assert chromium.cell(f"{GROUP}/diffTotal") == str(mine[0]["diffTotal"]) == "0"

        opened(chromium, dash, f"/consumer/{GROUP}", "consumer")
        progress = rmq_json("consumerProgress", "-n", ns, "-g", GROUP, "--json")
        expected = {}
        for r in progress["queues"]:  # type: ignore[index]
            where = f"{r['topic']}/{r['brokerName']}/{r['queueId']}/"
            expected[where + "brokerOffset"] = str(r["brokerOffset"])
            expected[where + "consumerOffset"] = str(r["consumerOffset"])
        assert {k: v for k, v in chromium.cells().items() if k.endswith("Offset")} == expected
        connection = rmq_json("consumerConnection", "-n", ns, "-g", GROUP, "--json")
        rows = chromium.driver.execute_script(
            "return document.querySelectorAll('#connections tbody tr').length"
        )
        assert rows == len(connection["connectionSet"]) == 1  # type: ignore[index]


def chart_points(b: Browser) -> list[int | None]:
    return b.driver.execute_script(
        "return Chart.getChart(document.getElementById('lag-chart')).data.datasets[0].data.slice()"
    )


def test_the_lag_chart_grows_when_the_consumer_stops_and_falls_when_it_resumes(
    cluster: Cluster, chromium: Browser
) -> None:
    with dashboard("-n", cluster.ns, "--lag-interval", "0.5") as dash:
        opened(chromium, dash, f"/consumer/{GROUP}", "lag-before")
        wait_until(lambda: chart_points(chromium)[-1:] == [0], 30, "a first point at 0")
        os.kill(cluster.consumer.proc.pid, signal.SIGSTOP)
        try:
            cluster.produce(20, "b")
            grown = wait_until(lambda: (p := chart_points(chromium)) and p[-1] == 20 and p, 60, "lag 20")
            chromium.driver.save_screenshot(
                str(Path(os.environ.get("RMQ_SCREENSHOTS", "build/screenshots")) / "lag-grown.png")
            )
        finally:
            os.kill(cluster.consumer.proc.pid, signal.SIGCONT)
        fallen = wait_until(lambda: (p := chart_points(chromium)) and p[-1] == 0 and p, 60, "lag back to 0")
        assert chromium.console_errors() == []
    assert grown[0] == 0 and max(grown) == 20
    peak = fallen.index(20)
    assert fallen[peak:][-1] == 0 and all(v is not None for v in fallen)
    # the series the page draws is the endpoint's
    assert len(fallen) >= 3


def test_writes_are_refused_without_allow_writes(cluster: Cluster, chromium: Browser) -> None:
    before = cluster.sent()
    with dashboard("-n", cluster.ns) as dash:
        status, doc = dash.post(
            "/api/admin/sendMessage", {"options": {"topic": TOPIC, "body": "x"}, "confirm": True}
        )
        assert status == 403 and doc == {
            "error": "read-only: rmq dashboard was started without --allow-writes"
        }
        status, doc = dash.post(
            "/api/admin/resetOffsetByTime", {"options": {"group": GROUP}, "confirm": True}
        )
        assert status == 403
        opened(chromium, dash, f"/topic/{TOPIC}", "topic-read-only")
        chromium.driver.find_element("css selector", "#send button").click()
        wait_until(chromium.error_text, 30, "the refusal on the page")
        assert chromium.error_text() == READ_ONLY
    assert cluster.sent() == before


def test_a_write_shows_its_command_and_runs_once_confirmed(cluster: Cluster, chromium: Browser) -> None:
    before = cluster.sent()
    with dashboard("-n", cluster.ns, "--allow-writes") as dash:
        status, doc = dash.post("/api/admin/sendMessage", {"options": {"topic": TOPIC, "body": "hi there"}})
        assert status == 200
        assert doc == {"plan": f"rmq sendMessage --topic {TOPIC} --body 'hi there' -n {cluster.ns}"}
        assert cluster.sent() == before  # a plan sends nothing
        opened(chromium, dash, f"/topic/{TOPIC}", "topic-writes")
        send = chromium.driver.find_element("css selector", "#send button")
        send.click()
        alert = wait_until(lambda: _alert(chromium), 30, "the confirmation")
        assert f"rmq sendMessage --topic {TOPIC} --body 'hello from rmq dashboard'" in alert.text
        alert.dismiss()
        assert cluster.sent() == before  # declined: nothing sent
        send.click()
        wait_until(lambda: _alert(chromium), 30, "the confirmation").accept()
        wait_until(lambda: chromium.driver.find_element("id", "send-result").is_displayed(), 30, "the result")
        assert cluster.sent() == before + 1
        result = chromium.driver.find_element("id", "send-result").text
        assert '"sendStatus": "SEND_OK"' in result or "SEND_OK" in result
        assert chromium.console_errors() == []
    cluster.settled()


def _alert(b: Browser) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = b.driver.switch_to.alert
        alert.text  # noqa: B018 - raises when there is none
        return alert
    except NoAlertPresentException:
        return None


def test_bad_input_is_one_line_on_the_page_and_from_the_endpoint(cluster: Cluster, chromium: Browser) -> None:
    with dashboard("-n", cluster.ns) as dash:
        status, doc = dash.get("/api/admin/topicStatus")
        assert (status, doc) == (400, {"error": "topicStatus: --topic/-t is required"})
        status, doc = dash.get("/api/admin/updateTopic?topic=X")
        assert status == 403 and doc["error"] == "updateTopic: not a command the dashboard reads with"
        status, doc = dash.get("/api/admin/queryMsgById?msg_id=00&send_message=true")
        assert status == 403 and "act on a client" in doc["error"]
        status, doc = dash.get("/api/admin/topicRoute?topic=NoSuchTopic&namesrv=127.0.0.1:1")
        assert status == 403 and doc["error"] == "topicRoute: namesrv are the dashboard's own"
        status, doc = dash.post("/api/admin/sendMessage", {"options": {"topic": "x" * 70_000}})
        assert status == 403  # read-only first: the body is never read
        status, doc = dash.get("/api/nothing")
        assert status == 404 and doc == {"error": "no such endpoint: /api/nothing"}
        page = chromium.open(dash, "/topic/NoSuchTopic", shot="topic-missing", state="error")
        assert "NoSuchTopic" in chromium.error_text() and "\n" not in chromium.error_text()
        assert page.text == ""
    with dashboard("-n", cluster.ns, "--allow-writes") as dash:
        status, doc = dash.post("/api/admin/sendMessage", {"options": {"topic": "x" * 70_000}})
        assert status == 400 and doc["error"] == "request body larger than 65536 bytes"
        status, doc = dash.post("/api/admin/sendMessage", {"options": {"topic": TOPIC, "color": "red"}})
        assert status == 400 and doc["error"] == "sendMessage: no such option color"
    closed = claim()
    with dashboard("-n", f"127.0.0.1:{closed}", "--timeout", "1") as dash:
        status, doc = dash.get("/api/admin/clusterList")
        assert status == 502 and f"127.0.0.1:{closed}" in doc["error"]
        chromium.open(dash, "/cluster", shot="cluster-unreachable", state="error")
        assert f"127.0.0.1:{closed}" in chromium.error_text()


def test_a_port_in_use_and_a_listen_beyond_loopback(cluster: Cluster) -> None:
    with dashboard("-n", cluster.ns) as dash:
        second = run_rmq("dashboard", "-n", cluster.ns, "--port", str(dash.port), timeout=60)
    assert second.returncode == 5
    assert one_line_error(second.stderr).endswith(
        f"dashboard: cannot listen on 127.0.0.1:{dash.port}: address already in use\n"
    )
    missing = run_rmq("dashboard", "--store", "/nonexistent/store", timeout=60)
    assert missing.returncode == 3
    assert one_line_error(missing.stderr).endswith("--store /nonexistent/store: no such directory\n")


def test_a_listen_beyond_loopback_is_warned_about(cluster: Cluster) -> None:
    """The warning comes before the bind (here refused: the port is taken on loopback)."""
    with dashboard("-n", cluster.ns) as dash:
        wide = run_rmq(
            "dashboard", "-n", cluster.ns, "--listen", "0.0.0.0", "--port", str(dash.port), timeout=60
        )
    assert wide.returncode == 5
    warning, refusal = wide.stderr.splitlines()
    assert warning == (
        "rmq dashboard: warning: listening on 0.0.0.0: anyone who can connect sees the cluster and the stores"
    )
    assert refusal.endswith(f"dashboard: cannot listen on 0.0.0.0:{dash.port}: address already in use")


def test_requests_are_signed_with_the_acl_keys_given(tmp_path: Path) -> None:
    """Under aclEnable the broker refuses the unsigned runtime request, and the page says so in
    one line; with an account's keys the dashboard's requests are signed as the CLI's."""
    from tests.support.acl import ACL, ADMIN, keys, serve_acl

    with serve_acl(tmp_path, ACL) as server:
        addr = f"127.0.0.1:{server.port}"
        with dashboard("-n", server.namesrv) as dash:
            status, doc = dash.get(f"/api/admin/brokerStatus?broker_addr={addr}")
        assert status == 502 and "\n" not in doc["error"] and "AclException" in doc["error"], doc
        with dashboard("-n", server.namesrv, *keys(ADMIN)) as dash:
            status, doc = dash.get(f"/api/admin/brokerStatus?broker_addr={addr}")
        cli = rmq_json("brokerStatus", "-n", server.namesrv, "-b", addr, *keys(ADMIN), "--json")
    assert status == 200
    assert doc[0]["addr"] == cli[0]["addr"] == addr  # type: ignore[index]
    assert set(doc[0]["table"]) == set(cli[0]["table"])  # type: ignore[index]
