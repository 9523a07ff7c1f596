"""The broker's ``config/*.json`` written off the event loop (``ConfigManager.persist``, 4.9.x).

The texts are taken on the loop (``BrokerConfigState.texts``: the tables as they are now); the
writes (``durable.replace_file`` with ``backup``: beside, fsync, ``.bak``, rename; one directory
fsync after the batch) run in a worker thread. One write at a time, the newest text of a file
wins: every text has a number, and a file is never written with an older text than the one it
holds. ``write_now`` writes on the calling thread (an admin request answered once its file is on
disk, and shutdown), after any write under way.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from pathlib import Path

from rmqcli.durable import fsync_dir, replace_file

log = logging.getLogger(__name__)


class ConfigWriter:
    """Writes the texts of one ``config`` directory, newest last."""

    def __init__(self, config_dir: Path):
        self.config_dir = config_dir
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()  # one writer of the directory's files at a time
        self._written: dict[str, int] = {}  # file name -> number of the text it holds
        self._wanted: dict[str, tuple[int, str]] = {}  # texts waiting for the background writer
        self._task: asyncio.Task[None] | None = None

    def write_now(self, texts: dict[str, str]) -> None:
        """Write ``texts`` here and now (after a write under way); the queued older ones are dropped."""
        numbered = self._number(texts)
        for name in texts:
            self._wanted.pop(name, None)
        self._write(numbered)

    def write_later(self, texts: dict[str, str]) -> None:
        """Queue ``texts`` for the background writer (a worker thread); written synchronously
        without a running event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_now(texts)
            return
        self._wanted.update(self._number(texts))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    async def settle(self) -> None:
        """Wait for the queued texts to be written (shutdown, before the final synchronous write)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def _number(self, texts: dict[str, str]) -> dict[str, tuple[int, str]]:
        return {name: (next(self._numbers), text) for name, text in texts.items()}

    async def _run(self) -> None:
        while self._wanted:
            batch, self._wanted = self._wanted, {}
            try:
                await asyncio.to_thread(self._write, batch)
            except OSError:
                log.exception("persisting %s failed", ", ".join(batch))
                for name, item in batch.items():  # tried again with the next write, unless replaced
                    self._wanted.setdefault(name, item)
                return

    def _write(self, numbered: dict[str, tuple[int, str]]) -> None:
        with self._lock:
            fresh = {n: t for n, t in numbered.items() if t[0] > self._written.get(n, 0)}
            if not fresh:
                return
            self.config_dir.mkdir(parents=True, exist_ok=True)
            for name, (number, text) in fresh.items():
                replace_file(self.config_dir / name, text.encode("utf-8"), backup=True, sync_dir=False)
                self._written[name] = number
            fsync_dir(self.config_dir, missing_ok=False)
