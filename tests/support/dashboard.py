"""``rmq dashboard`` in a child process on a free loopback port, and headless Chromium (Debian's
``chromium`` through its ``chromedriver``, driven by selenium) to look at its pages: each page's
console messages, its cells by ``data-key``, screenshots saved under ``SHOTS``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.cli import RMQ, rmq_env
from tests.support.ports import claim
from tests.support.serve import wait_until

# where the browser tests leave a screenshot of each page they load (RMQ_SCREENSHOTS to change)
SHOTS = Path(os.environ.get("RMQ_SCREENSHOTS", ROOT / "build" / "screenshots"))


@dataclass
class Dashboard:
    port: int
    proc: subprocess.Popen[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, Any]:
        """(status, JSON document) of a GET of ``path``."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@contextmanager
def dashboard(*args: str) -> Iterator[Dashboard]:
    """``rmq dashboard ARGS --port <free>``, ready (its first line printed); SIGTERM at the end."""
    port = claim()
    proc = subprocess.Popen(
        [*RMQ, "dashboard", *args, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=rmq_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"rmq dashboard: http://127.0.0.1:{port}/"), (line, proc.stderr.read())
        yield Dashboard(port, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Browser:
    """One headless Chromium window; ``open`` loads a page of the dashboard and waits for it."""

    def __init__(self, driver: Any):
        self.driver = driver

    def open(self, dash: Dashboard, hash_path: str, shot: str | None = None, state: str = "ready") -> Any:
        """Load ``#hash_path``, wait until the page says ``state`` (ready or error), save a
        screenshot named ``shot``; the ``main`` element."""
        from selenium.webdriver.common.by import By

        self.driver.get("about:blank")  # the last page's timers end with it
        self.driver.get_log("browser")  # and what it logged is not this page's
        self.driver.get(f"{dash.url}/#{hash_path}")
        wait_until(lambda: self.page_state() in ("ready", "error"), 60, f"page {hash_path} loaded")
        assert self.page_state() == state, (self.page_state(), self.error_text())
        if shot:
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(SHOTS / f"{shot}.png"))
        return self.driver.find_element(By.ID, "page")

    def page_state(self) -> str:
        return self.driver.execute_script("return document.getElementById('page')?.dataset.state || ''")

    def error_text(self) -> str:
        return self.driver.execute_script(
            "const e = document.getElementById('error'); return e && !e.hidden ? e.textContent : ''"
        )

    def cell(self, key: str) -> str:
        """The text of the cell whose ``data-key`` is ``key``."""
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, f'[data-key="{key}"]').text

    def cells(self, prefix: str = "") -> dict[str, str]:
        """Every ``data-key`` cell's text, by key (those starting with ``prefix``)."""
        found = self.driver.execute_script(
            "const out = {}; for (const c of document.querySelectorAll('[data-key]')) out[c.dataset.key] ="
            " c.textContent; return out"
        )
        return {k: v for k, v in found.items() if k.startswith(prefix)}

    def console_errors(self) -> list[str]:
        """The console's errors since the last call (every SEVERE entry of the browser log)."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]


@contextmanager
def browser() -> Iterator[Browser]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    try:
        yield Browser(driver)
    finally:
        driver.quit()
