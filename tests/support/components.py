"""The optional components some tests need, one pytest marker each, and what happens when one is
missing: the test skips, saying why, on a developer's or user's machine; it fails, saying why, where
the component is required: in CI (``CI=true``, as CI runs; all but the Debian packages, which
``.ci/run`` installs and which skip with the reason where absent) or where ``RMQ_REQUIRE`` names it
(``RMQ_REQUIRE=java,cpp``, ``all``; ``RMQ_REQUIRE=none`` turns CI's strictness off).

A test says what it needs with the marker (``@pytest.mark.java``) or, where the need shows only
inside it, with ``require("java")``. ``pytest -m "not java and not cpp ..."`` runs a tier without
them. Each check runs once per session, when a collected test first needs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest

from tests.support import JS, REAL_ROOT, ROOT, SHARED


@dataclass(frozen=True)
class Component:
    name: str
    what: str  # the marker's help: what the test needs
    check: Callable[[], str | None]  # None when present, else why it is missing
    # a Debian package (.ci/run installs it): skipped with the reason where absent, also in CI
    system_package: bool = False


def _java_17() -> bool:
    if shutil.which("java") is None:
        return False
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r'version "17[."]', out.stderr + out.stdout) is not None


def _kit(path: str, launcher: str) -> Callable[[], str | None]:
    def check() -> str | None:
        if not (SHARED / path / "bin" / launcher).is_file():
            return f"../shared/{path} is missing"
        return None if _java_17() else "Java 17 is missing"

    return check


def _real() -> str | None:
    return None if REAL_ROOT.is_dir() else "../shared/fixtures/real is absent"


def _cpp() -> str | None:
    try:  # the C++ client: only on x86-64 Linux wheels
        import rocketmq.client  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"the rocketmq 0.4.4 C++ client does not load ({exc})"
    return None


def _client5() -> str | None:
    python5 = ROOT / ".venv-rmq5" / "bin" / "python"
    if not python5.exists():
        return "no .venv-rmq5 (make test installs rocketmq-python-client 5.1.2 there)"
    probe = subprocess.run([str(python5), "-c", "import rocketmq.v5"], capture_output=True, timeout=60)
    return None if probe.returncode == 0 else "rocketmq-python-client does not import in .venv-rmq5"


def _js() -> str | None:
    if shutil.which("node") is None:
        return "node is missing"
    for package in ("ali-ons", "rocketmq-client-nodejs"):
        if not (JS / "node_modules" / package / "package.json").is_file():
            return f"tests/js/node_modules/{package} is missing (npm ci --prefix tests/js)"
    return None


def _prometheus() -> str | None:
    return None if shutil.which("prometheus") else "no prometheus binary (Debian's package prometheus)"


def _browser() -> str | None:
    for binary, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if shutil.which(binary) is None:
            return f"no {binary} (Debian's package {package})"
    try:
        import selenium.webdriver  # noqa: F401
    except ImportError as exc:
        return f"selenium does not import ({exc})"
    return None


def _spark() -> str | None:
    from rmqcli.errors import UsageError
    from rmqcli.pipeline import env

    try:
        env.require_spark()
    except UsageError as exc:
        return str(exc)
    return None


COMPONENTS = {
    c.name: c
    for c in (
        Component("real", "the stores real brokers wrote, ../shared/fixtures/real", _real),
        Component("java", "Java 17 and the real RocketMQ 4.9.8 kit in ../shared/rocketmq-4.9.8",
                  _kit("rocketmq-4.9.8", "broker")),
        Component("java5", "Java 17 and the real RocketMQ 5.1.1 kit in ../shared/rocketmq-5.1.1",
                  _kit("rocketmq-5.1.1", "broker")),
        Component("proxy5", "Java 17 and the real 5.1.1 proxy in ../shared/rocketmq-5.1.1-proxy",
                  _kit("rocketmq-5.1.1-proxy", "proxy")),
        Component("cpp", "the rocketmq 0.4.4 C++ client (PyPI rocketmq, x86-64 Linux)", _cpp),
        Component("client5", "the Apache RocketMQ 5.x Python client in .venv-rmq5", _client5),
        Component("js", "node and the clients of tests/js (ali-ons, rocketmq-client-nodejs)", _js),
        Component("spark", "PySpark and Java 17+ (the tests using the spark fixture)", _spark),
        Component("prometheus", "a Prometheus server binary (Debian's prometheus)", _prometheus, True),
        Component("browser", "headless Chromium, its chromedriver and selenium", _browser, True),
    )
}  # fmt: skip


@cache
def missing(name: str) -> str | None:
    """Why component ``name`` is missing here, or None."""
    return COMPONENTS[name].check()


def required() -> frozenset[str]:
    """The components whose absence fails a test: ``RMQ_REQUIRE``'s, else all of them in CI."""
    given = os.environ.get("RMQ_REQUIRE", "").strip()
    if not given:
        if os.environ.get("CI", "").strip().lower() not in ("true", "1", "yes"):
            return frozenset()
        return frozenset(n for n, c in COMPONENTS.items() if not c.system_package)
    if given == "all":
        return frozenset(COMPONENTS)
    if given == "none":
        return frozenset()
    names = frozenset(n.strip() for n in given.split(",") if n.strip())
    unknown = names - set(COMPONENTS)
    if unknown:
        known = sorted(COMPONENTS)
        raise pytest.UsageError(f"RMQ_REQUIRE: unknown components {sorted(unknown)}; known: {known}")
    return names


def require(name: str) -> None:
    """Go on when component ``name`` is here; else skip the test, or fail it where it is required."""
    reason = missing(name)
    if reason is None:
        return
    if name in required():
        pytest.fail(f"{name} is required here (CI or RMQ_REQUIRE): {reason}", pytrace=False)
    pytest.skip(reason)
