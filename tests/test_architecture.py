"""The layering of DESIGN.md §2 / docs/architecture.md, checked from the code's own imports.

Every arrow between top-level layers points down: a module may import its own layer and the
layers listed below it, never one above. Imports under `if TYPE_CHECKING:` count too (they
are arrows a reader follows); imports inside functions count as well.

Inside a layer, no module imports itself back through others (`test_no_import_circle_among_modules`):
the same rule, every import counts, so a lazy import in a function does not break a circle. A
registry imports what registers into it, and what registers imports a leaf module of shared
types (e.g. ahe/sandbox/backend_types.py), never the registry; a type needed only for
annotations is a Protocol in the lower module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A layer may import any layer that comes before it in this list.
LAYERS = [
    "ahe.errors",
    "ahe.io",
    "ahe.plugins",
    "ahe.resources",
    "ahe.tables",
    "ahe.llm",
    "ahe.runtime",
    "ahe.sandbox",
    "ahe.confine",
    "ahe.agents",
    "ahe.testing",
    "ahe.tasks",
    "ahe.rollout",
    "ahe.harness",
    "ahe.run_folder",
    "debugger",
    "evolve_agent",
    "explore_agent",
    "ahe.config",
    "ahe.evolution",
    "ahe.report",
]
# Entry points and wiring above every layer (they may import anything).
TOP = {"ahe.cli", "ahe.demo", "ahe.doctor", "ahe.run_one", "ahe.simulate", "ahe.experiments", "ahe"}
SKIP_PARTS = {"workspace", "aggregator"}  # agent workspaces: code the runtime loads, not the package


def _layer_of(module: str) -> str | None:
    best = None
    for layer in LAYERS + sorted(TOP, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            if best is None or len(layer) > len(best):
                best = layer
    return best


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _edges() -> set[tuple[str, str, str]]:
    edges = set()
    for pkg in ("ahe", "debugger", "evolve_agent", "explore_agent"):
        for f in (ROOT / pkg).rglob("*.py"):
            if SKIP_PARTS & set(f.relative_to(ROOT).parts):
                continue
            src = _layer_of(_module_name(f))
            for mod in _imports(f):
                dst = _layer_of(mod)
                if dst and src and dst != src and not (dst == "ahe" and "." in mod):
                    edges.add((src, dst, str(f.relative_to(ROOT))))
    return edges


def test_every_arrow_between_layers_points_down() -> None:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = sorted(
        f"{where}: {src} imports {dst}"
        for src, dst, where in _edges()
        if src in rank and dst in rank and rank[dst] > rank[src]
    )
    assert not upward, "upward imports (see docs/architecture.md):\n" + "\n".join(upward)


def test_no_layer_imports_an_entry_point() -> None:
    bad = sorted(f"{where}: {src} imports {dst}" for src, dst, where in _edges() if src in LAYERS and dst in TOP)
    assert not bad, "layers must not import the CLI or other entry points:\n" + "\n".join(bad)


def test_the_layer_graph_has_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst, _ in _edges():
        graph.setdefault(src, set()).add(dst)
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        seen[node] = 1
        for nxt in graph.get(node, ()):
            if seen.get(nxt) == 1:
                return stack + [node, nxt]
            if nxt not in seen:
                cycle = visit(nxt, stack + [node])
                if cycle:
                    return cycle
        seen[node] = 2
        return None

    for node in list(graph):
        if node not in seen:
            cycle = visit(node, [])
            assert cycle is None, "import cycle between layers: " + " -> ".join(cycle)


def test_every_package_module_belongs_to_a_layer() -> None:
    orphans = []
    for pkg in ("ahe", "debugger", "evolve_agent", "explore_agent"):
        for f in (ROOT / pkg).rglob("*.py"):
            if SKIP_PARTS & set(f.relative_to(ROOT).parts):
                continue
            if _layer_of(_module_name(f)) is None:
                orphans.append(str(f.relative_to(ROOT)))
    assert not orphans, "modules outside every layer (add them to LAYERS/TOP and docs/architecture.md): " + ", ".join(orphans)


def test_the_evolution_modules_import_each_other_without_a_cycle() -> None:
    """Inside ahe.evolution too (imports in functions count): the verdict policies are leaves the
    loop calls and `ahe.evolution.registry` registers; no policy imports the registry, attribution,
    phases or the loop, and nothing imports the loop's privates."""
    pkg = ROOT / "ahe" / "evolution"
    mods = {_module_name(f): f for f in pkg.glob("*.py") if f.name != "__init__.py"}
    graph = {m: {d for d in mods if d != m and any(i == d or i.startswith(d + ".") for i in _imports(f))}
             for m, f in mods.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack + [node, nxt]
            if nxt not in state and (cycle := visit(nxt, stack + [node])):
                return cycle
        state[node] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m, [])
            assert cycle is None, "import cycle inside ahe.evolution: " + " -> ".join(cycle)


def _module_files() -> dict[str, Path]:
    files = {}
    for pkg in ("ahe", "debugger", "evolve_agent", "explore_agent"):
        for f in (ROOT / pkg).rglob("*.py"):
            if not SKIP_PARTS & set(f.relative_to(ROOT).parts):
                files[_module_name(f)] = f
    return files


def _imported_modules(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules `path` imports, anywhere in it: `from a.b import c` is the module a.b.c when
    there is one, else a.b (its __init__); the parents a package import runs are not arrows."""

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(m for a in node.names if (m := owner(a.name)))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                m = full if full in known else owner(node.module)
                if m:
                    out.add(m)
    return out


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> b -> ... -> a) for each group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while (w := stack.pop()) != v:
                group.add(w)
            if group:
                groups.append(group | {v})

    for v in sorted(graph):
        if v not in index:
            connect(v)
    circles = []
    for group in groups:
        start = min(group)
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            nxt = sorted(graph[path[-1]] & group)
            if start in nxt:
                circles.append(path + [start])
                break
            for w in nxt:
                if w not in seen:
                    seen.add(w)
                    paths.append(path + [w])
    return sorted(circles)


def test_no_import_circle_among_modules() -> None:
    """No module imports itself back through others, inside a package or across them (every
    import counts: module level, TYPE_CHECKING, inside functions)."""
    known = _module_files()
    graph = {m: _imported_modules(f, known) - {m} for m, f in known.items()}
    circles = import_circles(graph)
    assert not circles, "import circles (make them one-way: docs/architecture.md, 'No import circles'):\n" + "\n".join(
        " -> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle_and_names_its_modules() -> None:
    graph = {"p.a": {"p.b"}, "p.b": {"p.c", "p.leaf"}, "p.c": {"p.a"}, "p.leaf": set(), "p.d": {"p.d2"}, "p.d2": {"p.d"}}
    assert import_circles(graph) == [["p.a", "p.b", "p.c", "p.a"], ["p.d", "p.d2", "p.d"]]
    assert import_circles({"p.a": {"p.b"}, "p.b": {"p.leaf"}, "p.leaf": set()}) == []

