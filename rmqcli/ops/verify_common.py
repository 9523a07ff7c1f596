"""What ``rmq verify`` reports: problems with their file and byte offset, and the counts checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ERROR = "error"
WARNING = "warning"


@dataclass
class Problem:
    """One finding: ``file`` is relative to the store, ``offset`` a byte offset within that file."""

    kind: str
    severity: str  # "error" | "warning"
    file: str
    offset: int | None
    message: str


@dataclass
class KindCount:
    kind: str
    severity: str
    count: int


@dataclass
class VerifyReport:
    """Everything ``verify_store`` found, plus how much it read."""

    store: str
    records: int = 0  # CommitLog message records checked
    bytes: int = 0  # CommitLog bytes covered by those records
    crc_checked: int = 0  # bodies whose CRC was recomputed
    commitlog_files: int = 0
    queues: int = 0
    units: int = 0  # consume-queue units checked
    index_files: int = 0
    index_entries: int = 0
    errors: int = 0
    warnings: int = 0
    kinds: list[KindCount] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    omitted: int = 0  # problems counted but not listed (``max_problems``)
    unconfirmed: int | None = None  # controller mode: records past confirmPhyOffset (not in ``records``)

    @property
    def clean(self) -> bool:
        """No errors (warnings do not make a store unusable)."""
        return self.errors == 0


class Collector:
    """Collects problems; keeps every count but lists at most ``limit`` problems."""

    def __init__(self, root: Path, limit: int | None = None):
        self.root = root
        self.limit = limit
        self.problems: list[Problem] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.omitted = 0

    def rel(self, path: Path | str) -> str:
        path = Path(path)
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def add(self, kind: str, severity: str, file: Path | str, offset: int | None, message: str) -> None:
        key = (kind, severity)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.limit is not None and len(self.problems) >= self.limit:
            self.omitted += 1
            return
        self.problems.append(Problem(kind, severity, self.rel(file), offset, message))

    def error(self, kind: str, file: Path | str, offset: int | None, message: str) -> None:
        self.add(kind, ERROR, file, offset, message)

    def warning(self, kind: str, file: Path | str, offset: int | None, message: str) -> None:
        self.add(kind, WARNING, file, offset, message)

    def absorb(self, other: Collector) -> None:
        """Take what ``other`` collected (with the same limit) as if each of its problems had been
        added here, in its order, after everything added so far: the same problems listed, omitted
        and counted."""
        for problem in other.problems:
            if self.limit is not None and len(self.problems) >= self.limit:
                self.omitted += 1
            else:
                self.problems.append(problem)
        self.omitted += other.omitted
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n

    def fill(self, report: VerifyReport) -> VerifyReport:
        order = {ERROR: 0, WARNING: 1}
        report.problems = sorted(
            self.problems, key=lambda p: (order.get(p.severity, 2), p.kind, p.file, p.offset or 0)
        )
        report.kinds = [
            KindCount(k, s, n)
            for (k, s), n in sorted(self.counts.items(), key=lambda i: (order.get(i[0][1], 2), i[0][0]))
        ]
        report.errors = sum(n for (_, s), n in self.counts.items() if s == ERROR)
        report.warnings = sum(n for (_, s), n in self.counts.items() if s == WARNING)
        report.omitted = self.omitted
        return report
