"""The console's assets are shipped in the package: every file under ``rmqcli/dashboard/static``
matches a ``package-data`` pattern of pyproject.toml, the pages import only shipped modules, and the
vendored Chart.js is the release the README names, with its licence beside it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.support import ROOT

STATIC = ROOT / "rmqcli" / "dashboard" / "static"


def test_every_asset_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = patterns["rmqcli.dashboard"]
    files = [p.relative_to(STATIC.parent) for p in STATIC.rglob("*") if p.is_file()]
    assert files
    missing = [str(f) for f in files if not any(Path(f).match(g) for g in shipped)]
    assert missing == []


def test_pages_import_only_shipped_modules() -> None:
    for script in [*STATIC.glob("*.js"), *STATIC.glob("pages/*.js")]:
        for target in re.findall(r'from "(/static/[^"]+)"', script.read_text()):
            assert (STATIC / target.removeprefix("/static/")).is_file(), (script.name, target)
    for target in re.findall(r'(?:src|href)="(/static/[^"]+)"', (STATIC / "index.html").read_text()):
        assert (STATIC / target.removeprefix("/static/")).is_file(), target


def test_the_vendored_chart_js_release_and_licence() -> None:
    head = (STATIC / "vendor" / "chart.umd.min.js").read_text()[:200]
    assert "Chart.js v4.6.1" in head
    assert "The MIT License" in (STATIC / "vendor" / "chart.js-LICENSE.md").read_text()
    assert "Chart.js 4.6.1 (MIT" in (ROOT / "README.md").read_text()
