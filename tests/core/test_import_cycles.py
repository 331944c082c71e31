"""No import circles in the project, counting the imports inside functions (they run too, later, and hide a
loop from a reader); imports under ``if TYPE_CHECKING:`` never run and are left out. Read with ``ast``: nothing
is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of ``package``."""
    return {module_name(p, root): p for p in (root / package).rglob("*.py")}


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            visit(child)

    visit(tree)
    return out


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from pkg import name`` counts ``pkg.name`` when that is a
    module, else ``pkg``)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        edges: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            edges |= {t for t in targets if t in known and t != name}
        # importing a.b.c runs a.b's __init__ too: an edge to each package on the way that is not this
        # module's own (a module's own packages are already importing or imported when it runs)
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
        edges |= {p for t in list(edges) for p in _packages_of(t) if p in known and p not in own}
        graph[name] = edges
    return graph


def _packages_of(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
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
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_finder_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import f\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg import a\n")
    (tmp_path / "pkg" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n")
    (tmp_path / "pkg" / "d.py").write_text("from . import c\n")
    assert cycles(import_graph(modules("pkg", tmp_path))) == [["pkg.a", "pkg.b"]]


def test_the_finder_finds_a_circle_through_a_package_init(tmp_path: Path) -> None:
    """``from pkg.out.trackers import x`` runs ``pkg/out/__init__.py``, which imports ``pkg.out.hub``, which
    imports the first module: a circle no single import line shows."""
    for folder in ("pkg", "pkg/out", "pkg/run"):
        (tmp_path / folder).mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "out" / "__init__.py").write_text("from pkg.out.hub import push\n")
    (tmp_path / "pkg" / "out" / "hub.py").write_text("from pkg.run.metrics import read\n")
    (tmp_path / "pkg" / "out" / "trackers.py").write_text("")
    (tmp_path / "pkg" / "run" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "run" / "metrics.py").write_text("from pkg.out.trackers import x\n")
    assert cycles(import_graph(modules("pkg", tmp_path))) == [["pkg.out", "pkg.out.hub", "pkg.run.metrics"]]


def test_grpo_core_is_in_no_import_cycle() -> None:
    found = cycles(import_graph(modules("grpo_core") | modules("grpo_rewards")))
    assert [c for c in found if any(m.startswith("grpo_core") for m in c)] == []


def test_grpo_rewards_has_no_import_cycles() -> None:
    assert cycles(import_graph(modules("grpo_rewards"))) == []
