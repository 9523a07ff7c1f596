"""What ``rmq pipeline`` needs from the machine: PySpark and Java 17+ (PySpark 4 runs on Java 17)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from rmqcli.errors import UsageError

MIN_JAVA = 17
INSTALL_HINT = "pip install 'rmqcli[spark]'"


def require_pyspark() -> None:
    """``UsageError`` with the install command when PySpark or pyarrow is missing."""
    for module in ("pyspark", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"rmq pipeline needs PySpark and pyarrow ({module} is missing): {INSTALL_HINT}")


def java_executable() -> str | None:
    """The ``java`` PySpark will launch: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.is_file() else None
    return shutil.which("java")


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version`` output (``1.8.0_392`` is 8, ``17.0.15`` is 17)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def require_java() -> None:
    """``UsageError`` unless Java 17 or newer can be run (where PySpark looks for it)."""
    java = java_executable()
    where = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    if java is None:
        raise UsageError(f"rmq pipeline needs Java {MIN_JAVA} or newer for Spark: no java found on {where}")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"rmq pipeline needs Java {MIN_JAVA} or newer: cannot run {java}: {exc}") from None
    major = java_major(done.stderr + done.stdout)
    if major is None or major < MIN_JAVA:
        found = f"Java {major}" if major else "an unknown Java version"
        raise UsageError(f"rmq pipeline needs Java {MIN_JAVA} or newer for Spark; {java} is {found}")


def require_spark() -> None:
    require_pyspark()
    require_java()
