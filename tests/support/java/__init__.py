"""Small Java programs of the tests (``*.java`` here), compiled against the 4.9.8 kit's client at
test time, and the kit's ``mqadmin``; both run with their state under a test's tmp directory.
Without ``javac`` (or Java 17 and the kit) the callers skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.components import require
from tests.support.oracle import KIT

HERE = Path(__file__).parent


def kit_env(state: Path) -> dict[str, str]:
    """The environment of a kit launcher: its logs, settings and ``user.home`` under ``state``."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(state)
    return env


def compile_programs(out: Path) -> Path:
    """Every ``*.java`` here compiled into ``out`` (``javac``); skips the test when Java 17, the kit
    or ``javac`` is missing."""
    require("java")
    if shutil.which("javac") is None:
        pytest.skip("javac is missing")
    made = javac(out)
    assert made.returncode == 0, made.stderr
    return out


def javac(out: Path) -> subprocess.CompletedProcess[str]:
    """``javac -cp 'KIT/lib/*'`` of every ``*.java`` here into ``out`` (the benches call it too)."""
    out.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in HERE.glob("*.java"))
    return subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", str(KIT / "lib" / "*"), *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )


_LAUNCH = (
    'source "$1/bin/env.sh"; classes="$2"; main="$3"; shift 3; '
    'exec $JAVA -Xms64m -Xmx256m "${JAVA_BASE_OPT[@]/#$CLASSPATH/$CLASSPATH:$classes}" '
    '-Dlogback.configurationFile="$ORACLE_DIR/conf/logback_client.xml" "$main" "$@"'
)


def _command(classes: Path, main: str, args: tuple[str, ...]) -> list[str]:
    """``main`` of ``classes`` with the kit's client class path and JVM options (as its
    ``bin/clienttest``)."""
    return ["bash", "-c", _LAUNCH, "java", str(KIT), str(classes), main, *args]


def run_program(classes: Path, state: Path, main: str, *args: str, timeout: float = 120) -> str:
    """``main`` of ``classes`` run to its end: its stdout, which must end with exit status 0."""
    proc = subprocess.run(
        _command(classes, main, args), capture_output=True, text=True, timeout=timeout, env=kit_env(state)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def start_program(classes: Path, state: Path, main: str, *args: str) -> subprocess.Popen[str]:
    """``main`` of ``classes`` started with pipes for its stdin and stdout (stderr discarded), for a
    program that answers line by line."""
    return subprocess.Popen(
        _command(classes, main, args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=kit_env(state),
    )


def trace_round_trip(
    classes: Path, state: Path, namesrv: str, topic: str, producer_group: str, consumer_group: str
) -> str:
    """``TraceRoundTrip``: one message sent and consumed by traced clients; its msgId."""
    out = run_program(classes, state, "TraceRoundTrip", namesrv, topic, producer_group, consumer_group, "60")
    assert "RESULT consumed=true" in out, out
    return next(line.split()[1] for line in out.splitlines() if line.startswith("MSGID "))


def mqadmin(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The kit's ``mqadmin ARGS`` (its exit status is 0 even when the command failed), run again
    (up to 3 times) while it fails on a remoting timeout: on a very loaded machine its 3 s calls
    to the NameServer can time out, which says nothing about what the test compares."""
    for _ in range(3):
        run = subprocess.run(
            [str(KIT / "bin" / "mqadmin"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=kit_env(state),
        )
        if "RemotingTimeoutException" not in run.stdout + run.stderr:
            break
    return run
