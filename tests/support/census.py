"""The one-line census a test run ends with: how many tests ran, passed, failed and skipped in all
and under each component they need (``tests.support.components``), and why the skipped ones were
skipped, so that a run which skipped a part of the suite says so."""

from __future__ import annotations

from collections import Counter

import pytest

NONE = "none"  # the tests that need no optional component


class Census:
    def __init__(self) -> None:
        self.names: list[str] = []  # the components, in the order the census lists them
        self.components: dict[str, list[str]] = {}
        self.outcomes: dict[str, str] = {}
        self.reasons: Counter[str] = Counter()

    def collected(self, nodeid: str, components: list[str]) -> None:
        self.components[nodeid] = components or [NONE]

    def report(self, report: pytest.TestReport) -> None:
        """The outcome of a test: its call's, or its setup's or teardown's when that did not pass.
        Under pytest-xdist the workers collect, so a test's components come with its report (its
        keywords hold its markers)."""
        if report.nodeid not in self.components:
            self.collected(report.nodeid, [n for n in self.names if n in report.keywords])
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if hasattr(report, "wasxfail"):  # an expected failure is neither a pass nor a skip
                self.outcomes[report.nodeid] = "xfailed" if report.skipped else "xpassed"
                return
            self.outcomes[report.nodeid] = report.outcome
            if report.skipped and isinstance(report.longrepr, tuple):
                self.reasons[str(report.longrepr[2]).removeprefix("Skipped: ")] += 1
        elif report.when == "teardown" and report.failed:
            self.outcomes[report.nodeid] = "failed"

    def line(self) -> str:
        totals: Counter[str] = Counter(self.outcomes.values())
        ran: Counter[str] = Counter()
        skipped: Counter[str] = Counter()
        for nodeid, outcome in self.outcomes.items():
            for name in self.components.get(nodeid, [NONE]):
                (skipped if outcome == "skipped" else ran)[name] += 1
        parts = [
            f"{name} {ran[name]}" + (f" ({skipped[name]} skipped)" if skipped[name] else "")
            for name in sorted(set(ran) | set(skipped))
        ]
        expected = f", {totals['xfailed']} expected to fail" if totals["xfailed"] else ""
        line = (
            f"census: {sum(totals.values())} tests, {totals['passed']} passed, {totals['failed']} failed"
            f"{expected}, {totals['skipped']} skipped; ran by component: {', '.join(parts)}"
        )
        if self.reasons:
            line += "; skipped because: " + "; ".join(f"{r} ({n})" for r, n in self.reasons.most_common())
        return line


CENSUS = Census()
