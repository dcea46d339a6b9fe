"""The layering, enforced: imports flow one way, ``api``/``tools`` → ``projections`` → ``eventstore``, without cycles.

Every module of the four packages is parsed (nothing is imported) and every
import statement is followed, at any depth (inside functions, classes,
``if TYPE_CHECKING:`` blocks and ``try:`` included), relative ones resolved
against the module's package. A failure names the module and the line.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "mnemolog"
LAYERS = ("eventstore", "projections", "api", "tools")  # bottom to top

#: What each layer must never import.
FORBIDDEN = {
    "eventstore": {"projections", "api", "tools"},
    "projections": {"api", "tools"},
    "api": {"tools"},
    "tools": set(),
}


class Import(NamedTuple):
    source: str  # the importing module
    target: str  # the imported module (a module of ours)
    path: Path
    line: int
    typing_only: bool = False  # under ``if TYPE_CHECKING:``: a layering dependency, never run

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def module_files() -> dict[str, Path]:
    """``mnemolog.<layer>.<...>`` → its file, for every module of the four packages."""
    found = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((NAMESPACE, *parts))] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if _is_package(path) else module.rpartition(".")[0]
    typing_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == NAMESPACE or alias.name.startswith(NAMESPACE + "."):
                    yield Import(module, alias.name, path, node.lineno, id(node) in typing_only)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not (base == NAMESPACE or base.startswith(NAMESPACE + ".")):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield Import(module, submodule if submodule in modules else base, path, node.lineno, id(node) in typing_only)


def all_imports() -> list[Import]:
    modules = module_files()
    return [found for module, path in modules.items() for found in imports_of(module, path, modules)]


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == NAMESPACE and parts[1] in LAYERS else None


def layering_violations(imports: list[Import]) -> list[str]:
    bad = []
    for found in imports:
        source, target = layer_of(found.source), layer_of(found.target)
        if source and target in FORBIDDEN[source]:
            bad.append(f"{found.where()}: {found.source} imports {found.target} ({source} must not import {target})")
    return bad


def import_cycles(imports: list[Import]) -> list[list[Import]]:
    """One cycle through each strongly connected group of modules, as the imports that close it."""
    edges: dict[str, dict[str, Import]] = {}
    for found in imports:
        if found.source != found.target:
            edges.setdefault(found.source, {}).setdefault(found.target, found)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    cycles = []
    for group in groups:
        # The shortest way back to the group's first module, inside the group (breadth first).
        first = min(group)
        came: dict[str, Import] = {}
        frontier = [first]
        while frontier and first not in came:
            following = []
            for node in frontier:
                for target, found in sorted(edges.get(node, {}).items()):
                    if target in group and target not in came:
                        came[target] = found
                        following.append(target)
            frontier = following
        cycle, node = [], first
        while True:
            found = came[node]
            cycle.append(found)
            node = found.source
            if node == first:
                break
        cycles.append(cycle[::-1])
    return cycles


def describe(cycle: list[Import]) -> str:
    return " -> ".join(f"{found.source} ({found.where()})" for found in cycle) + f" -> {cycle[0].source}"


# -- the checks ----------------------------------------------------------------------------------


def test_the_walker_sees_imports_at_any_depth():
    """Guard the walker: relative imports resolved, function-level and TYPE_CHECKING ones followed."""
    imports = all_imports()
    pairs = {(i.source, i.target) for i in imports}
    assert len(module_files()) > 80
    # api/keys.py imports the service under TYPE_CHECKING, relatively nothing: absolute.
    assert ("mnemolog.api.keys", "mnemolog.projections.service") in pairs
    # tools/bench_graph.py imports the read side inside its functions.
    assert ("mnemolog.tools.bench_graph", "mnemolog.projections.service") in pairs
    # A two-dot relative import in projections/linking/relink.py resolves to a sibling package's module.
    assert ("mnemolog.projections.linking.relink", "mnemolog.projections.entities.projector") in pairs


def test_the_checks_catch_a_bad_import_and_a_cycle(tmp_path):
    """The rules themselves fail on what they forbid."""
    up = Import("mnemolog.eventstore.store", "mnemolog.projections.runner", ROOT / "eventstore" / "store.py", 3)
    across = Import("mnemolog.projections.runner", "mnemolog.eventstore.store", ROOT / "projections" / "runner.py", 5)
    assert layering_violations([up]) and not layering_violations([across])
    assert [len(c) for c in import_cycles([up, across])] == [2]


def test_imports_flow_one_way():
    bad = layering_violations(all_imports())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_import_cycles():
    # Imports under TYPE_CHECKING never run, so they close no cycle (the layering still applies to them).
    cycles = import_cycles([i for i in all_imports() if not i.typing_only])
    assert not cycles, "import cycles:\n" + "\n".join(describe(c) for c in cycles)


def test_pyproject_names_every_package_folder():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {module for module, path in module_files().items() if _is_package(path)}
    for layer in LAYERS:
        for folder in (ROOT / layer).rglob("*"):
            if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
                folders.add(".".join((NAMESPACE, *folder.relative_to(ROOT).parts)))
    assert folders - listed == set(), f"pyproject.toml's packages miss {sorted(folders - listed)}"
    assert {p for p in listed if p != NAMESPACE} - folders == set(), "pyproject.toml names packages that are not folders"


if __name__ == "__main__":  # pragma: no cover
    found = all_imports()
    print("\n".join(layering_violations(found)) or "no imports against the layering")
    print("\n".join(describe(c) for c in import_cycles(found)) or "no import cycles")
    sys.exit(0)


def test_the_api_and_the_cli_read_through_the_service_objects():
    """No projection connection in ``api/`` and ``tools/``, and no SQL in a route module: they call read objects bound to the service.

    (``api/auth.py`` owns ``auth.db``, the API keys, which are no projection.)
    """
    offenders = []
    for folder in ("api", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "read_conn(" in line or (path.name.startswith("routes_") and re.search(r"\.execute\(", line)):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
