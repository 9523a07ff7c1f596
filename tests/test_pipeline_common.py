"""Shared by the pipeline tests: one local[2] Spark session for the whole run, the stores the jobs
read (generated ones and the real broker's), and the environment checks of ``rmq pipeline``.

Spark tests skip only when PySpark or Java 17+ is missing, saying which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.generate import generate
from rmqcli.errors import UsageError
from rmqcli.pipeline import env
from tests.realfixtures import variants

RMQ = [sys.executable, "-m", "rmqcli.cli.main"]


def _missing() -> str | None:
    try:
        env.require_spark()
    except UsageError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def spark():
    """The Spark session every pipeline test shares (``rmq pipeline`` commands reuse it)."""
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from rmqcli.pipeline.session import spark_session

    with spark_session("local[2]", "rmq pipeline tests") as session:
        yield session


@pytest.fixture(scope="session")
def generated_stores(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("pipeline-stores")
    return [generate(root / preset, preset).outdir for preset in ("small", "demo")]


def real_stores() -> list[Path]:
    return [v.store for v in variants()]


@pytest.fixture(scope="session")
def all_stores(generated_stores) -> list[Path]:
    """Generated stores, then every store under ../shared/fixtures/real/ (when present)."""
    return [*generated_stores, *real_stores()]


def rmq(*args: str, env_vars: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RMQ, *args], capture_output=True, text=True, env={**os.environ, **(env_vars or {})}
    )


def rmq_json(*args: str):  # type: ignore[no-untyped-def]
    proc = rmq(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rmq_jsonl(*args: str) -> list[dict]:
    proc = rmq(*args)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.split("\n") if line]


# --- the environment checks (no Spark needed) ------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("no version here", None),
    ],
)
def test_java_major(text, major):
    assert env.java_major(text) == major


def test_missing_java_is_a_one_line_usage_error(tmp_path, generated_stores):
    proc = rmq("pipeline", "stats", str(generated_stores[0]), env_vars={"JAVA_HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Java 17" in proc.stderr and "Traceback" not in proc.stderr


def test_an_old_java_is_refused(tmp_path, generated_stores):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    fake.chmod(0o755)
    proc = rmq(
        "pipeline", "search", str(generated_stores[0]), "--key", "k", env_vars={"JAVA_HOME": str(tmp_path)}
    )
    assert proc.returncode == 2 and "Java 8" in proc.stderr and proc.stderr.count("\n") == 1


def test_help_does_not_import_pyspark():
    code = "import sys; from rmqcli.cli.main import app; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_missing_pyspark_says_how_to_install(generated_stores):
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "from rmqcli.cli.main import run\n"
        "run(['pipeline', 'export', sys.argv[1], '--out', sys.argv[2]])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(generated_stores[0]), "/nonexistent/out"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "pip install 'rmqcli[spark]'" in proc.stderr and proc.stderr.count("\n") == 1


def test_progress_line_counts_the_tasks_of_its_group(spark):  # noqa: F811
    import io

    from rmqcli.pipeline.progress import ProgressLine

    sc = spark.sparkContext
    sc.setJobGroup("rmq-progress-test", "progress test")
    try:
        assert sc.parallelize(range(10), 5).map(lambda x: x + 1).sum() == 55
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    stream = io.StringIO()
    line = ProgressLine(sc, "rmq-progress-test", "test job", enabled=True, stream=stream)
    assert line.snapshot() == (1, 5, 0, 5)
    assert line.text() == "test job: 5/5 tasks done, 0 running (1 Spark jobs)"
