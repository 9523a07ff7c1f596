"""The Spark session of a pipeline command, job groups, and errors raised inside tasks.

``--master`` picks the cluster (``local[*]`` by default, or whatever ``spark-submit`` set). In a
local session the Python workers run the interpreter running ``rmq`` (so they import the same
``rmqcli``); on a cluster the executors need ``rmqcli`` installed in their Python
(``PYSPARK_PYTHON``) and must see the store paths.

A task that meets bad input raises ``TaskError``, whose text carries the exit code and the
one-line message; ``jobs`` turns the Spark failure that wraps it back into the same ``RmqError``.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rmqcli import errors
from rmqcli.pipeline.env import require_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_MARK = "<<rmq-task-error "
_END = " rmq-task-error>>"
_MARKED = re.compile(re.escape(_MARK) + r"(\d+) (\w+) (.*?)" + re.escape(_END), re.S)
_MISSING_PATH = ("PATH_NOT_FOUND", "Path does not exist", "Input path does not exist")
_BY_CODE: dict[int, type[errors.RmqError]] = {
    cls.exit_code: cls
    for cls in (
        errors.UsageError,
        errors.NotFoundError,
        errors.CorruptDataError,
        errors.NetworkError,
        errors.BrokerError,
    )
}
# Spark's log: warnings and errors (a failed task's traceback among them) go to the log file
# ``spark_session`` gives the JVM as stderr; the user sees one line through ``jobs``.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = rmq: spark: %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = fatal
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = fatal
"""


class TaskError(Exception):
    """An ``RmqError`` met inside a Spark task, carried to the driver in the exception text."""

    def __init__(self, error: errors.RmqError):
        text = str(error).replace("\n", " ")
        super().__init__(f"{_MARK}{error.exit_code} {type(error).__name__} {text}{_END}")


@contextmanager
def task_errors() -> Iterator[None]:
    """Inside a task: re-raise an ``RmqError`` as ``TaskError`` (other errors pass unchanged)."""
    try:
        yield
    except errors.RmqError as exc:
        raise TaskError(exc) from None


def error_from_text(text: str) -> errors.RmqError | None:
    """The ``RmqError`` a ``TaskError`` in ``text`` (a Spark failure message) describes."""
    match = _MARKED.search(text)
    if match is None:
        return None
    code, _, message = int(match.group(1)), match.group(2), match.group(3)
    cls = _BY_CODE.get(code, errors.RmqError)
    return cls(message)


def _log_config() -> str:
    path = os.path.join(tempfile.gettempdir(), "rmq-spark-log4j2.properties")
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == _LOG4J2:
                return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix="rmq-spark-log4j2.", dir=tempfile.gettempdir())
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(_LOG4J2)
    os.replace(tmp, path)
    return path


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ  # set by spark-submit for a Python driver


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` for a while (what a child started meanwhile inherits)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


@contextmanager
def spark_session(master: str | None = None, app: str = "rmq pipeline") -> Iterator[SparkSession]:
    """A SparkSession for one command; an already active session is reused (and left running).

    ``master``: a Spark master URL; ``None`` means the one ``spark-submit`` gave, else ``local[*]``.
    A session started here sends the JVM's (and its workers') stderr to a log file, so that only
    ``rmq``'s own lines reach the terminal; a failure names the file.
    """
    require_spark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    builder = SparkSession.builder.appName(app)
    submitted = _under_spark_submit()
    if master is None and not submitted:
        master = DEFAULT_MASTER
    if master is not None:
        builder = builder.master(master)
    if not submitted:
        options = f"-Dlog4j2.configurationFile=file:{_log_config()}"
        builder = builder.config("spark.driver.extraJavaOptions", options)
    if master is not None and not master.startswith("local"):
        # a cluster: the first job (the paths check, rmqcli.pipeline.paths) waits for the executors
        builder = builder.config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
    if master is not None and master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
        # the local workers run this interpreter, which imports this rmqcli (SparkContext reads
        # the workers' Python from the environment, not from the configuration)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    fd, log = tempfile.mkstemp(prefix="rmq-spark-", suffix=".log")
    os.close(fd)
    keep = True
    try:
        try:
            with _stderr_to(log):
                session = builder.getOrCreate()
        except Exception as exc:  # the JVM did not start: a one-line reason
            raise errors.UsageError(
                f"cannot start Spark (master {master}): {_first_line(exc)} (Spark's log: {log})"
            ) from None
        keep = False
        try:
            yield session
        except errors.RmqError as exc:
            if type(exc) is errors.RmqError:  # a Spark failure rmq cannot explain: say where the log is
                keep = True
                raise errors.RmqError(f"{exc} (Spark's log: {log})") from exc
            raise
        finally:
            session.stop()
    finally:
        if not keep:
            os.unlink(log)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def jobs(session: SparkSession, label: str, *, progress: bool | None = None) -> Iterator[None]:
    """Run the Spark actions of one step under a job group, with a progress line on stderr.

    A failed task that carried an ``RmqError`` raises that error; any other Spark failure is an
    ``RmqError`` with the first line of Spark's message. Ctrl-C cancels the group's jobs.
    """
    from rmqcli.pipeline.progress import ProgressLine

    sc = session.sparkContext
    group = f"rmq-{uuid.uuid4().hex}"
    sc.setJobGroup(group, label, interruptOnCancel=True)
    line = ProgressLine(sc, group, label, enabled=progress)
    line.start()
    try:
        yield
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        raise
    except errors.RmqError:
        raise
    except Exception as exc:
        found = error_from_text(str(exc))
        if found is not None:
            raise found from None
        if any(mark in str(exc) for mark in _MISSING_PATH):
            raise errors.NotFoundError(_first_line(exc)) from None
        raise errors.RmqError(f"Spark job failed: {_first_line(exc)}") from exc
    finally:
        line.stop()
        sc.setLocalProperty("spark.jobGroup.id", None)
