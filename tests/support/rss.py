"""The resident memory of a child process, read from /proc (the memory bounds of issue 41)."""

from __future__ import annotations

from pathlib import Path

from tests.support.serve import ServeProcess


def rss_mib(serve: ServeProcess) -> float:
    """``VmRSS`` of the ``rmq serve`` process, in MiB."""
    assert serve.proc is not None
    for line in Path(f"/proc/{serve.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")
