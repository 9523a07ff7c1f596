"""Fixtures every tier shares, and the markers that let a tier run alone.

``rmq`` runs the CLI in process (typer's runner, returns the Result); ``rmq_proc`` runs it as a
child process (returns the CompletedProcess). Tests that need an optional component carry its
marker (``tests.support.components``: ``real``, ``java``, ``java5``, ``proxy5``, ``cpp``,
``client5``, ``js``, ``spark``, the last given to every test that uses the ``spark`` fixture); where
one is missing the test skips saying why, or fails where it is required (in CI). The run ends
with a census: the tests run, passed and skipped under each component.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.census import CENSUS
from tests.support.cli import invoke_rmq, run_rmq
from tests.support.components import COMPONENTS, require
from tests.support.realfixtures import variants
from tests.support.stores import tear_last_record


def pytest_configure(config: pytest.Config) -> None:
    # no per-example deadline: a loaded machine must not fail a property that holds
    settings.register_profile("rmq", deadline=None)
    settings.load_profile("rmq")
    for component in COMPONENTS.values():
        config.addinivalue_line("markers", f"{component.name}: needs {component.what}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``spark`` for the users of the fixture; the census counts each test under its components."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        CENSUS.collected(item.nodeid, [n for n in COMPONENTS if item.get_closest_marker(n) is not None])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each component the test's markers name: here, or a skip (a failure where it is required)."""
    for name in COMPONENTS:
        if item.get_closest_marker(name) is not None:
            require(name)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    CENSUS.report(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if CENSUS.outcomes:
        terminalreporter.write_line(CENSUS.line())


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
    require("spark")
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
