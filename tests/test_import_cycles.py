"""No import cycle among the modules of ``rmqcli`` and ``formats``, not even a type-only one.

The graph is read from the source (``ast``), not from what an interpreter happens to import: every
``import`` and ``from ... import`` counts, at module level, under ``TYPE_CHECKING`` or inside a
function, relative ones resolved against the importing module's package. Importing ``a.b.c`` runs
the ``__init__`` of ``a`` and ``a.b`` first, so it also depends on those packages, except on the
packages the importing module lies inside (they run before it anyway). ``from p import x`` depends
on ``p`` and, when ``x`` is a module, on ``p.x``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rmqcli", "formats")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, a package named by its ``__init__.py``."""
    found: dict[str, Path] = {}
    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name ``module`` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` whose import it starts."""

    def known(name: str) -> str | None:  # the longest prefix that is one of ours
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module, path in modules.items():
        for name in imported_names(module, path):
            target = known(name)
            if target is None or target == module:
                continue
            graph[module].add(target)
            parts = target.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in modules and parent != module and not module.startswith(parent + "."):
                    graph[module].add(parent)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    lines = [f"{len(component)} modules import one another:"]
    lines += [f"  {m} -> {', '.join(sorted(graph[m] & members))}" for m in component]
    return "\n".join(lines)


def test_the_graph_sees_every_import_form(tmp_path: Path) -> None:
    (tmp_path / "rmqcli" / "pkg").mkdir(parents=True)
    (tmp_path / "formats").mkdir()
    for name in ("rmqcli/__init__.py", "rmqcli/pkg/__init__.py", "formats/__init__.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "formats" / "leaf.py").write_text("")
    (tmp_path / "rmqcli" / "pkg" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n"
    )
    (tmp_path / "rmqcli" / "pkg" / "b.py").write_text("def f():\n    from ..pkg.c import x\n")
    (tmp_path / "rmqcli" / "pkg" / "c.py").write_text("import formats.leaf\nimport rmqcli.pkg.a\n")
    graph = import_graph(module_files(tmp_path))
    assert graph["rmqcli.pkg.a"] == {"rmqcli.pkg", "rmqcli.pkg.b"}  # its own package: named here
    assert graph["rmqcli.pkg.b"] == {"rmqcli.pkg.c"}  # inside rmqcli.pkg: not a dependency
    assert graph["rmqcli.pkg.c"] == {"formats", "formats.leaf", "rmqcli.pkg.a"}
    assert cycles(graph) == [["rmqcli.pkg.a", "rmqcli.pkg.b", "rmqcli.pkg.c"]]


def test_no_import_cycle() -> None:
    graph = import_graph(module_files())
    assert len(graph) > 100  # the tree was found
    found = cycles(graph)
    assert not found, "\n".join(describe(component, graph) for component in found)
