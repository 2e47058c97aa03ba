"""The layout shows the architecture: imports flow one way, the silo side never imports server code, and
no reference in the sources points outside the repository."""

import ast
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
MODULES = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
           for p in (SRC / "vcmc").rglob("*.py")}

#: Modules that run inside a silo (their whole import closure stays on the silo's side).
SILO_SIDE = ("vcmc.silo", "vcmc.flower.client")
#: Server-side code a silo must never import.
SERVER_SIDE = ("vcmc.matching", "vcmc.aggregation", "vcmc.pipeline", "vcmc.assessment", "vcmc.federation",
               "vcmc.results",
               "vcmc.report", "vcmc.study", "vcmc.baselines", "vcmc.api", "vcmc.cli", "vcmc.estimator",
               "vcmc.flower.server", "vcmc.lca")
#: The public facade re-exports the whole library lazily; it is nobody's dependency.
FACADE = "vcmc"


def _resolve(name: str) -> str | None:
    """The module a dotted name imports: itself if it is a module, else the closest parent that is."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # ``from pkg import name``: the submodule pkg.name if there is one, else pkg itself
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for n in names:
            if n.startswith("vcmc"):
                target = _resolve(n)
                if target and target != module:
                    out.add(target)
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_packages_import_each_other_one_way():
    packages: dict[str, set[str]] = {}
    for m, targets in GRAPH.items():
        if m == FACADE:
            continue
        packages.setdefault(_package(m), set()).update(_package(t) for t in targets
                                                       if _package(t) != _package(m) and t != FACADE)
    assert _cycles(packages) == []


def test_no_module_import_cycle():
    assert _cycles({m: t - {FACADE} for m, t in GRAPH.items() if m != FACADE}) == []


def test_nothing_imports_the_facade():
    assert [m for m, t in GRAPH.items() if FACADE in t and m != FACADE] == []


def _closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for t in GRAPH.get(m, ()):
            if t not in seen and t != FACADE:
                seen.add(t)
                todo.append(t)
    return seen


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(SILO_SIDE)))
def test_the_silo_side_never_imports_server_code(module):
    bad = sorted(t for t in _closure(module) if t.startswith(SERVER_SIDE))
    assert bad == [], f"{module} imports server-side code: {bad}"


def test_no_reference_to_files_outside_the_repository():
    outside = re.compile(r"method\.md|architecture\.md|conventions\.md|baselines\.md|ecosystem\.md|"
                         r"shared/|\bissue \d+|\bSPEC \d+")
    hits = [f"{p.relative_to(SRC)}:{i}: {line.strip()}" for p in MODULES.values()
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if outside.search(line)]
    assert hits == [], "\n".join(hits[:20]) + f"\n... {len(hits)} in all"
