"""Fixtures every tier shares, and the markers that let a tier run alone.

``rmq`` runs the CLI in process (typer's runner, returns the Result); ``rmq_proc`` runs it as a
child process (returns the CompletedProcess). Tests that need an optional component carry its
marker (``tests.support.components``: ``real``, ``java``, ``java5``, ``proxy5``, ``cpp``,
``client5``, ``js``, ``spark``, the last given to every test that uses the ``spark`` fixture); where
one is missing the test skips saying why, or fails where it is required (in CI). The run ends
with a census: the tests run, passed and skipped under each component.

Two more markers sort the suite by cost, not by component, for ``make check`` to leave out. No
test file names them: they are given at collection from what each test reaches (``reached``: its
function, its fixtures, the helpers of tests/ they call), so a new test is sorted the day it is
written. ``server``: it starts a server (``rmq serve`` as ``ServeProcess``, a real broker's JVM, a
broker or listener on a socket in this process). ``slow``: it starts a child process (``rmq`` as a
command, a lock holder, runs killed on purpose, Java, a client driver), or ``SLOW`` lists it as
measured slow.
"""

from __future__ import annotations

import importlib
import inspect
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.census import CENSUS
from tests.support.cli import invoke_rmq, run_rmq
from tests.support.components import COMPONENTS, require
from tests.support.realfixtures import variants
from tests.support.stores import sparse_copy, tear_last_record

# no per-example deadline: a loaded machine must not fail a property that holds
settings.register_profile("rmq", deadline=None)
# make check's (--hypothesis-profile=rmq-check): each property tried on fewer examples
settings.register_profile("rmq-check", settings.get_profile("rmq"), max_examples=20)


def pytest_configure(config: pytest.Config) -> None:
    settings.load_profile(config.getoption("hypothesis_profile", None) or "rmq")
    CENSUS.names = list(COMPONENTS)
    for component in COMPONENTS.values():
        config.addinivalue_line("markers", f"{component.name}: needs {component.what}")
    config.addinivalue_line(
        "markers",
        "server: starts a server (rmq serve, a real broker, a listener in process); "
        "given at collection by what the test reaches (tests/conftest.py)",
    )
    config.addinivalue_line(
        "markers",
        "slow: starts a child process, or measured slow (SLOW); given at collection (tests/conftest.py)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``spark`` for the users of the fixture, ``server`` and ``slow`` for what a test reaches,
    ``slow`` for those of ``SLOW``; the census counts each test under its components."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        for marker in reached(item):
            item.add_marker(marker)
        if item.nodeid.split("[")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
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


# --- server, slow and real: what a test reaches ---------------------------------------------------
# What a test reaches decides: its function, its fixtures' (setup and teardown) and, followed to
# what they call, the helpers of tests/ (modules of rmqcli and libraries are looked up, not
# followed). So only primitives are listed here: a new helper around one, or a new test calling
# one, is sorted without being listed.
REACHES = {
    "server": (  # starts a server: rmq serve, a real broker, a listener on a socket in this process
        "tests.support.serve:ServeProcess",
        "tests.support.oracle:Jvm",  # a real broker, name server or proxy
        "rmqcli.remoting.server.connection:Server",  # an in-process broker's or name server's listener
        "rmqcli.broker.ha.master:HAMaster",
        "rmqcli.broker.grpc.server:start",
        "rmqcli.grpcserver.server:Server",
        "asyncio:start_server",
        "socket:create_server",
        ".listen",  # an attribute of anything: socket.listen(), loop.create_server()
        ".start_server",
        ".create_server",
    ),
    "real": (  # reads the stores real brokers wrote (parametrized ones are marked by real_params)
        "tests.support.realfixtures:variants",
        "tests.support:REAL_ROOT",
    ),
    "slow": (  # starts a child process: rmq as a command, a lock holder, a JVM, a client driver
        "subprocess:Popen",
        "subprocess:run",
        "subprocess:call",
        "subprocess:check_call",
        "subprocess:check_output",
        "asyncio:create_subprocess_exec",
        "asyncio:create_subprocess_shell",
        "multiprocessing:Process",
        "os:fork",
    ),
}

# Tests measured slow that start no child process: over 1.4 s on 2 cores at load 3 (node ids without
# their parameters). `make check` shows its 5 slowest tests: the next ones to list here.
SLOW = {
    "tests/ops/test_store_fuzz.py::test_store_fuzz",  # 28 s
    "tests/ops/test_offsets.py::test_reset_to_a_time_picks_the_message_stored_then_and_is_applied_only_with_yes",
    "tests/broker/test_timer_inprocess.py::test_the_service_holds_at_most_its_cap_and_delivers_in_order",
    "tests/store/test_scan_shared.py::test_index_with_a_key_listed_twice_is_covered",
    "tests/ops/test_clean.py::test_applied_the_files_move_into_the_backup_and_come_back",
    "tests/cli/test_render_pretty_json.py::test_the_same_text_as_the_standard_encoder",  # 400 examples
    "tests/store/test_fastdispatch.py::test_generated_stores",
}

_PRIMITIVES: dict[str, tuple[str, str]] = {}  # "module:name" or ".attribute" -> (marker, that spec)
_OBJECTS: dict[int, tuple[str, str]] = {}  # id of a primitive -> (marker, its spec)
_EDGES: dict[int, tuple[object, list[object], dict[str, str]]] = {}  # id -> (obj, what it names, kinds)


def _primitives() -> None:
    for marker, specs in REACHES.items():
        for spec in specs:
            _PRIMITIVES[spec] = (marker, spec)
            if spec.startswith("."):
                continue
            module, name = spec.split(":")
            try:
                _OBJECTS[id(getattr(importlib.import_module(module), name))] = (marker, spec)
            except ModuleNotFoundError as exc:  # a library missing here (grpc): nothing starts it here
                if (exc.name or "").partition(".")[0] in ("tests", "rmqcli"):
                    raise pytest.UsageError(f"tests/conftest.py REACHES: {spec} moved? {exc}") from exc
            except AttributeError as exc:
                raise pytest.UsageError(f"tests/conftest.py REACHES: {spec} moved? {exc}") from exc


def _ours(obj: object) -> bool:
    """A function or class of the tests: followed (rmqcli's and libraries' are only looked up)."""
    module = getattr(obj, "__module__", None) or ""
    return (inspect.isfunction(obj) or inspect.isclass(obj)) and module.partition(".")[0] == "tests"


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names a function's code (with its nested functions) uses."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _bound(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _edges(obj: object) -> tuple[list[object], dict[str, str]]:
    """What ``obj`` names that may be followed, and the markers of the primitives it names."""
    if id(obj) in _EDGES:
        return _EDGES[id(obj)][1:]
    named: list[object] = []
    kinds: dict[str, str] = {}
    where = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if inspect.isclass(obj):
        named += [b for b in obj.__mro__[1:] if _ours(b)]
        for attr in vars(obj).values():
            attr = getattr(attr, "__func__", getattr(attr, "fget", attr))  # static/class methods, properties
            if inspect.isfunction(attr):
                named.append(attr)
    elif inspect.isfunction(obj):
        names = _names(obj.__code__)
        named += [c.cell_contents for c in obj.__closure__ or () if _bound(c)]
        for name in names:
            if f".{name}" in _PRIMITIVES:
                kinds.setdefault(_PRIMITIVES[f".{name}"][0], f"{where} uses .{name}")
            value = obj.__globals__.get(name, sys.modules.get(name))  # a global, or a module imported inside
            if isinstance(value, types.ModuleType):  # module.attribute: the attributes the code names
                ours = value.__name__.partition(".")[0] in ("tests", "rmqcli")
                for n in names:
                    spec = _PRIMITIVES.get(f"{value.__name__}:{n}")
                    if spec is not None:
                        kinds.setdefault(spec[0], f"{where} calls {spec[1]}")
                    elif ours and hasattr(value, n):
                        named.append(getattr(value, n))
            elif value is not None:
                named.append(value)
    for target in named:
        if id(target) in _OBJECTS:
            marker, spec = _OBJECTS[id(target)]
            kinds.setdefault(marker, f"{where} calls {spec}")
    _EDGES[id(obj)] = (obj, [t for t in named if _ours(t)], kinds)
    return _EDGES[id(obj)][1:]


def reached(item: pytest.Item) -> dict[str, str]:
    """The markers ``server``, ``slow`` and ``real`` that ``item`` earns by what it reaches, each with
    the first place found that starts a server or a child process, or reads the real stores."""
    if not _PRIMITIVES:
        _primitives()
    info = getattr(item, "_fixtureinfo", None)
    fixtures = [
        d.func
        for n in getattr(item, "fixturenames", ())
        for d in (info.name2fixturedefs.get(n, ()) if info else ())
    ]
    test = getattr(item, "obj", None)
    test = getattr(getattr(test, "hypothesis", None), "inner_test", test)  # a property: its body
    todo = [inspect.unwrap(f) for f in (test, *fixtures) if callable(f)]
    seen: set[int] = set()
    found: dict[str, str] = {}
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not _ours(obj):
            continue
        seen.add(id(obj))
        named, kinds = _edges(obj)
        for marker, where in kinds.items():
            found.setdefault(marker, where)
        todo += named
    return found


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
    shutil.copytree(pristine, path, copy_function=sparse_copy)
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
