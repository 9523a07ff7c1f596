"""Helpers shared by the test tiers: where things are, ``rmq`` runners, stores, servers, clients."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
SHARED = ROOT.parent / "shared"  # ../shared: the real 4.9.8 kit and the stores it wrote
REAL_ROOT = SHARED / "fixtures" / "real"
JS = ROOT / "tests" / "js"  # the ali-ons client (npm ci --prefix tests/js)
