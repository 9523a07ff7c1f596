"""The environment checks of ``rmq pipeline``: Java and PySpark missing or too old, one line each.

The Spark session and the stores the pipeline tests read are tests/conftest.py's fixtures; Spark
tests skip only when PySpark or Java 17+ is missing, saying which.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rmqcli.pipeline import env


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


def test_missing_java_is_a_one_line_usage_error(tmp_path, generated_stores, rmq_proc):
    proc = rmq_proc("pipeline", "stats", str(generated_stores[0]), env={"JAVA_HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Java 17" in proc.stderr and "Traceback" not in proc.stderr


def test_an_old_java_is_refused(tmp_path, generated_stores, rmq_proc):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    fake.chmod(0o755)
    proc = rmq_proc(
        "pipeline", "search", str(generated_stores[0]), "--key", "k", env={"JAVA_HOME": str(tmp_path)}
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


def test_progress_line_counts_the_tasks_of_its_group(spark):
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
