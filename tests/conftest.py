"""Fixtures every tier shares, and the markers that let a tier run alone.

``rmq`` runs the CLI in process (typer's runner, returns the Result); ``rmq_proc`` runs it as a
child process (returns the CompletedProcess). Tests that need an optional component carry its
marker: ``spark`` (PySpark and Java 17+; given to every test that uses the ``spark`` fixture),
``cpp`` (the ``rocketmq`` 0.4.4 C++ client), ``js`` (node and tests/js's ali-ons) and ``java``
(Java 17 and ../shared/rocketmq-4.9.8); the test is skipped, saying why, where it is missing.
``pytest -m "not spark and not java and not cpp and not js"`` runs what needs none of them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import JS
from tests.support.cli import invoke_rmq, run_rmq
from tests.support.realfixtures import variants
from tests.support.stores import tear_last_record


def _have_cpp() -> str | None:
    from tests.support.broker_drivers import HAVE_CLIENT

    return None if HAVE_CLIENT else "the rocketmq 0.4.4 C++ client is not installed"


def _have_js() -> str | None:
    if shutil.which("node") is not None and (JS / "node_modules" / "ali-ons" / "package.json").is_file():
        return None
    return "node or tests/js/node_modules/ali-ons is missing"


def _have_java() -> str | None:
    from tests.support.oracle import HAVE_JAVA

    return None if HAVE_JAVA else "Java 17 or ../shared/rocketmq-4.9.8 is missing"


def _have_spark() -> str | None:
    from rmqcli.errors import UsageError
    from rmqcli.pipeline import env

    try:
        env.require_spark()
    except UsageError as exc:
        return str(exc)
    return None


NEEDS: dict[str, Callable[[], str | None]] = {"cpp": _have_cpp, "js": _have_js, "java": _have_java}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``spark`` for users of the fixture (which skips without Spark); a skip for each other marker
    whose component is missing (checked once, only when a collected test needs it)."""
    missing: dict[str, str | None] = {}
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        for name, check in NEEDS.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in missing:
                missing[name] = check()
            if missing[name] is not None:
                item.add_marker(pytest.mark.skip(reason=missing[name]))


# --- rmq --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def rmq() -> Callable[..., object]:
    """``rmq(*args)``: the CLI in this process; returns typer's Result (exit_code, stdout, stderr)."""
    return invoke_rmq


@pytest.fixture(scope="session")
def rmq_proc() -> Callable[..., object]:
    """``rmq_proc(*args, env=None, timeout=600, check=False)``: ``rmq`` as a child process, without
    this environment's ``RMQ_*`` settings; returns the CompletedProcess."""
    return run_rmq


# --- stores -----------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generator's small store (seed 1). Shared by the whole run: copy it before changing it."""
    from fixtures.generate import generate

    path = tmp_path_factory.mktemp("pristine") / "store"
    generate(path, "small", seed=1)
    return path


@pytest.fixture
def store(pristine: Path, tmp_path: Path) -> Path:
    """A writable copy of ``pristine`` (modules with stores of their own define their ``store``)."""
    path = tmp_path / "store"
    shutil.copytree(pristine, path)
    return path


@pytest.fixture(scope="session")
def damaged_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated store after a crash: a torn last record, queues and index past it, ``abort``.
    Shared by the whole run: copy it before changing it."""
    from fixtures.generate import generate

    root = tmp_path_factory.mktemp("damaged") / "store"
    generate(root, "small", seed=11)
    return tear_last_record(root)


# --- Spark and the stores the pipeline reads ----------------------------------------------------------
@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one local[2] Spark session of the run (``rmq pipeline`` commands reuse it)."""
    reason = _have_spark()
    if reason is not None:
        pytest.skip(reason)
    from rmqcli.pipeline.session import spark_session

    with spark_session("local[2]", "rmq pipeline tests") as session:
        yield session


@pytest.fixture(scope="session")
def generated_stores(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from fixtures.generate import generate

    root = tmp_path_factory.mktemp("pipeline-stores")
    return [generate(root / preset, preset).outdir for preset in ("small", "demo")]


@pytest.fixture(scope="session")
def all_stores(generated_stores: list[Path]) -> list[Path]:
    """Generated stores, then every store under ../shared/fixtures/real/ (when present)."""
    return [*generated_stores, *(v.store for v in variants())]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """``rmq serve`` over a generated small store for one test module (``tests.support.served``)."""
    from tests.support.served import start

    s = start(tmp_path_factory.mktemp("serve-admin"))
    try:
        yield s
        assert s.server.stop() == 0, s.server.output()
    finally:
        s.server.kill()
