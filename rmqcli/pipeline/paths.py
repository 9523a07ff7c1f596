"""Paths the driver hands to Spark tasks: absolute, and seen by the executors before a job starts.

A task resolves a relative path in its executor's working directory (on a standalone cluster,
``<worker>/work/app-.../<executor>/``), so every path given to tasks is made absolute on the
driver (``absolute``). On a cluster (any master but ``local...``) the executors may be on other
machines: before the job, ``check_visible`` runs a short probe job whose tasks look for what the
driver sees (each store's CommitLog files, a token file the driver writes in an output
directory, which they must also be able to create files in). A path an executor does not see,
an executor Python without ``rmqcli``, or no executor answering within ``PROBE_TIMEOUT_S`` is a
``UsageError`` naming the path, before anything is written anywhere else.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import UsageError
from rmqcli.pipeline.tasks import FileTask, is_url

PROBE_TIMEOUT_S = float(os.environ.get("RMQ_SPARK_PROBE_TIMEOUT", "120"))
PROBE_TASK_S = 0.2
PROBE_ROUNDS = 3
TOKEN_PREFIX = ".rmq-probe-"
_NO_RMQ = "No module named 'rmqcli'"


def absolute(path: str | Path) -> str:
    """``path`` made absolute against the driver's directory (a URL is returned as given)."""
    if is_url(path):
        return str(path)
    return os.path.abspath(os.path.expanduser(str(path)))


def is_local(master: str) -> bool:
    """Whether a master URL runs every executor in the driver's machine (``local``,
    ``local[N]``, ``local-cluster[...]``)."""
    return master.startswith("local")


@dataclass(frozen=True)
class Probe:
    """What an executor must see: files as the driver lists them, and output directories."""

    files: tuple[tuple[str, int], ...]  # (path, the size the driver read; 0: any size)
    outs: tuple[tuple[str, str], ...]  # (directory, the token written in it)


def _look(probe: Probe) -> tuple[tuple[str, int], list[tuple[str, str, str]]]:
    """On an executor: which executor this is (its host, and the pid of its Python daemon, the
    worker's parent), and (path, what is wrong, host) for each path not as the driver sees it."""
    time.sleep(PROBE_TASK_S)  # so that every free core takes a task, not the first one all of them
    host = socket.gethostname()
    wrong: list[tuple[str, str, str]] = []
    for path, size in probe.files:
        try:
            found = os.stat(path).st_size
        except OSError as exc:
            wrong.append((path, exc.strerror or type(exc).__name__, host))
            continue
        if found < size:  # a CommitLog file only grows while its broker writes
            wrong.append((path, f"{found} bytes where the driver read {size}", host))
    for directory, token in probe.outs:
        name = os.path.join(directory, TOKEN_PREFIX + token)
        try:
            with open(name, encoding="ascii") as handle:
                seen = handle.read()
        except OSError as exc:
            wrong.append((directory, f"the driver's check file is missing there: {exc.strerror}", host))
            continue
        if seen != token:
            wrong.append((directory, "another directory of that name", host))
            continue
        mine = f"{name}-{uuid.uuid4().hex}"
        try:
            with open(mine, "x"):
                pass
            os.unlink(mine)
        except OSError as exc:
            wrong.append((directory, f"cannot create a file there ({exc.strerror})", host))
    return (host, os.getppid()), wrong


def check_visible(
    session,  # type: ignore[no-untyped-def]
    tasks: Iterable[FileTask] = (),
    *,
    files: Iterable[str] = (),
    outs: Iterable[str] = (),
) -> None:
    """On a cluster, refuse (``UsageError``) when an executor does not see the tasks' CommitLog
    files, the other ``files`` or the output directories ``outs`` as the driver does. An output
    directory that does not exist yet is created for the check and removed after it. Nothing to
    do for a local master."""
    sc = session.sparkContext
    if is_local(sc.master):
        return
    listed = [(t.path, t.size) for t in tasks if not is_url(t.path)]
    listed += [(f, 0) for f in files if not is_url(f)]
    tokens = [(d, uuid.uuid4().hex) for d in outs if not is_url(d)]
    if not listed and not tokens:
        return
    written: list[Path] = []
    created: list[Path] = []
    try:
        for directory, token in tokens:
            created += _make_dirs(Path(directory))
            path = Path(directory) / (TOKEN_PREFIX + token)
            path.write_text(token, encoding="ascii")
            written.append(path)
        wrong = _run_probe(sc, Probe(tuple(listed), tuple(tokens)))
    finally:
        for path in written:
            path.unlink(missing_ok=True)
        for directory in reversed(created):
            try:
                directory.rmdir()
            except OSError:
                pass  # not empty: something else was put there meanwhile
    if wrong:
        path, reason, host = wrong[0]
        raise UsageError(
            f"{path}: not visible to the Spark executors as the driver sees it ({reason}, on {host}); "
            "give a path every executor mounts under the same name, or a URL Spark reads and writes"
        )


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first."""
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    directory.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _executors(sc) -> int:  # type: ignore[no-untyped-def]
    """How many executors the application has now (the status tracker lists the driver too)."""
    return max(len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1, 1)


def _run_probe(sc, probe: Probe) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """The probe on every executor: two tasks per core, in rounds until every executor ran one
    (at most ``PROBE_ROUNDS``), all cancelled after ``PROBE_TIMEOUT_S``. A ``UsageError`` when
    the executors cannot run it or not every one did."""
    group = f"rmq-probe-{uuid.uuid4().hex}"
    timer = threading.Timer(PROBE_TIMEOUT_S, sc.cancelJobGroup, (group,))
    sc.setJobGroup(group, "rmq: check the paths on the executors", interruptOnCancel=True)
    timer.start()
    seen: set[tuple[str, int]] = set()
    wrong: set[tuple[str, str, str]] = set()
    try:
        for _ in range(PROBE_ROUNDS):
            slices = max(2 * sc.defaultParallelism, 2)
            for executor, found in (
                sc.parallelize(range(slices), slices).map(lambda _: _look(probe)).collect()
            ):
                seen.add(executor)
                wrong.update(found)
            if wrong or len(seen) >= _executors(sc):
                return sorted(wrong)
    except Exception as exc:
        text = str(exc)
        if _NO_RMQ in text:
            raise UsageError(
                "the Spark executors' Python cannot import rmqcli: install 'rmqcli[spark]' in the Python "
                "they run (PYSPARK_PYTHON / spark.pyspark.python)"
            ) from None
        if not timer.is_alive():
            raise UsageError(
                f"cannot tell whether the Spark executors see the paths: no executor ran the check "
                f"within {PROBE_TIMEOUT_S:.0f} s (master {sc.master}: are workers up with free cores?)"
            ) from None
        raise
    finally:
        timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)
    raise UsageError(
        f"cannot tell whether the Spark executors see the paths: {len(seen)} of {_executors(sc)} executors "
        f"ran the check in {PROBE_ROUNDS} rounds (master {sc.master})"
    )
