"""A one-line progress report on stderr for the Spark jobs of a job group (``StatusTracker``)."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark import SparkContext

INTERVAL = 0.5  # seconds between polls


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressLine:
    """Polls ``SparkContext.statusTracker()`` and rewrites one stderr line: tasks done / total.

    ``enabled`` defaults to whether ``stream`` is a terminal; the line is cleared at the end.
    """

    def __init__(
        self,
        sc: SparkContext,
        group: str,
        label: str,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
    ):
        self.sc = sc
        self.group = group
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self.last = ""

    def snapshot(self) -> tuple[int, int, int, int]:
        """(jobs, tasks done, tasks running, tasks in all) of the group's stages so far."""
        tracker = self.sc.statusTracker()
        done = running = total = 0
        job_ids = tracker.getJobIdsForGroup(self.group)
        for job_id in job_ids:
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    running += stage.numActiveTasks
                    total += stage.numTasks
        return len(job_ids), done, running, total

    def text(self) -> str:
        jobs, done, running, total = self.snapshot()
        return f"{self.label}: {done}/{total} tasks done, {running} running ({jobs} Spark jobs)"

    def _show(self, text: str) -> None:
        pad = max(self._width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)
        self.last = text

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            try:
                self._show(self.text())
            except Exception:  # the context is stopping; the line is only a courtesy
                return

    def start(self) -> None:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="rmq-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
