"""The shape of the code: imports flow one way without cycles, and the API and the CLI read through the service's objects.

The imports are read from the source (``ast``), as the interpreter would run
them: module-level and function-level imports count, imports under
``if TYPE_CHECKING:`` do not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"eventstore": "mnemolog.eventstore", "projections": "mnemolog.projections", "api": "mnemolog.api", "tools": "mnemolog.tools"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = LAYERS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    found = {}
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _runtime_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports when it runs (TYPE_CHECKING blocks left out)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    # A package's __init__ runs before any of its modules anyway: edges into it are not dependencies between modules.
    return {m for m in out if m in known and m != name and known[m].name != "__init__.py"}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def _graph() -> dict[str, set[str]]:
    known = _sources()
    return {name: _runtime_imports(name, path, known) for name, path in known.items()}


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_imports_flow_one_way():
    order = list(LAYERS.values())  # eventstore <- projections <- api, tools
    allowed = {
        "mnemolog.eventstore": {"mnemolog.eventstore"},
        "mnemolog.projections": {"mnemolog.eventstore", "mnemolog.projections"},
        "mnemolog.api": set(order[:3]),
        "mnemolog.tools": set(order),
    }
    layer = lambda module: ".".join(module.split(".")[:2])  # noqa: E731
    wrong = sorted((m, i) for m, imports in _graph().items() for i in imports if layer(i) not in allowed[layer(m)])
    assert wrong == []


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
