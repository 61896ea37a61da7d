"""The tree's import rules (docs/internals.md "Layers" and "Adapter dependencies"), read
from the source with ast: no import cycles, imports point gateway -> adapters -> core, trio
stays out of core but for the flusher, and an adapter imports another only where
docs/internals.md declares it. Every import counts, function-level and TYPE_CHECKING ones
too: a cycle hidden in a function is still a cycle for a reader.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "adapters", "gateway")
# Shared adapter machinery that is not an adapter (no protocol of its own).
SHARED = {"adapters.wire", "adapters.peer", "adapters.wsmask"}
# adapter -> the modules of other adapters it may import (docs/internals.md
# "Adapter dependencies"; all trio-free).
DECLARED = {
    "http": {
        "adapters.iggy", "adapters.iggy.dedup", "adapters.iggy.errors", "adapters.iggy.options",
        "adapters.iggy.render",
        "adapters.iggy.replies", "adapters.iggy.session", "adapters.iggy.snapshot",
        "adapters.iggy.table", "adapters.iggy.types",
        "adapters.nats.jetstream.api", "adapters.nats.jetstream.streams",
        "adapters.pravega.readergroups",
    },
    "spark": {
        "adapters.iggy", "adapters.iggy.codec", "adapters.iggy.errors", "adapters.iggy.messages",
        "adapters.iggy.producer", "adapters.iggy.replies", "adapters.iggy.spec", "adapters.iggy.types",
    },
}
TRIO_IN_CORE = {"core.flusher"}  # the task that runs the log's fsyncs (docs/internals.md "Layers")


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute names; ``from m import x`` gives m and m.x)."""
    out: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package[: len(package) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _owner(module: str) -> str | None:
    """The project module an imported name lives in (``core.log.Partition`` -> ``core.log``)."""
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module or None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, imported in IMPORTS.items():
        for target in filter(None, map(_owner, imported)):
            if target != name and not name.startswith(target + "."):  # a package's own __init__
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in MODULES:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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


def test_the_checker_sees_a_cycle():
    graph = defaultdict(set, {"core.a": {"core.b"}, "core.b": {"core.a"}})
    saved = dict(MODULES)
    MODULES.update({"core.a": Path("a.py"), "core.b": Path("b.py")})
    try:
        assert ["core.a", "core.b"] in _cycles(graph)
    finally:
        MODULES.clear()
        MODULES.update(saved)


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_imports_point_gateway_adapters_core():
    wrong = []
    for name, imported in IMPORTS.items():
        layer = name.split(".")[0]
        for target in imported:
            top = target.split(".")[0]
            if (layer == "core" and top in ("adapters", "gateway")) or (layer == "adapters" and top == "gateway"):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_trio_stays_out_of_core():
    users = {name for name, imported in IMPORTS.items()
             if name.startswith("core.") and any(t == "trio" or t.startswith("trio.") for t in imported)}
    assert users <= TRIO_IN_CORE


def test_adapters_import_each_other_only_where_declared():
    undeclared = []
    for name, imported in IMPORTS.items():
        parts = name.split(".")
        if parts[0] != "adapters" or len(parts) < 2 or name in SHARED:
            continue
        adapter = parts[1]
        for target in filter(None, map(_owner, imported)):
            tparts = target.split(".")
            if tparts[0] != "adapters" or len(tparts) < 2 or tparts[1] == adapter:
                continue
            if target == "adapters" or any(target == s or target.startswith(s + ".") for s in SHARED):
                continue
            if target not in DECLARED.get(adapter, set()):
                undeclared.append(f"{name} imports {target}")
    assert undeclared == []
