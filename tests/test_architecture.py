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
SILO_SIDE = ("vcmc.silo", "vcmc.flower.client", "vcmc.mcmc", "vcmc.rows")
#: Server-side code a silo must never import.
SERVER_SIDE = ("vcmc.matching", "vcmc.aggregation", "vcmc.pipeline", "vcmc.assessment", "vcmc.federation",
               "vcmc.results",
               "vcmc.report", "vcmc.research", "vcmc.result_builder", "vcmc.api", "vcmc.cli", "vcmc.estimator",
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
    """``vcmc.silo``, ``vcmc.pipeline``, ...; inside the research harness one level deeper
    (``vcmc.research.study``), whose parts are packages of their own."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[1:2] == ["research"] and len(parts) > 2 else parts[:2])


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


#: The computation a silo runs on its rows: plain functions of arrays, apart from the boundary.
COMPUTATION = ("vcmc.mcmc", "vcmc.rows")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(COMPUTATION)))
def test_the_computation_imports_no_message_type_and_nothing_of_the_boundary(module):
    bad = sorted(t for t in _closure(module) if t.startswith(("vcmc.protocol", "vcmc.silo", "vcmc.flower")))
    assert bad == [], f"{module} imports boundary code: {bad}"


def test_no_reference_to_files_outside_the_repository():
    outside = re.compile(r"method\.md|architecture\.md|conventions\.md|baselines\.md|ecosystem\.md|"
                         r"shared/|\bissue \d+|\bSPEC \d+")
    hits = [f"{p.relative_to(SRC)}:{i}: {line.strip()}" for p in MODULES.values()
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if outside.search(line)]
    assert hits == [], "\n".join(hits[:20]) + f"\n... {len(hits)} in all"


#: The library core's only doors into the research harness: the method registry (the comparators, named by
#: module path and imported when run) and the CLI commands that exist to run the harness.
RESEARCH = "vcmc.research"
DOORS_TO_RESEARCH = ("vcmc.methods", "vcmc.cli.simulate", "vcmc.cli.study", "vcmc.cli.demo")


def test_the_core_never_imports_the_research_harness():
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets
                 if t.startswith(RESEARCH) and not m.startswith(RESEARCH) and m not in DOORS_TO_RESEARCH
                 and m != FACADE)
    assert bad == [], "core modules import the research harness:\n" + "\n".join(bad)


def test_protocol_imports_only_leaves():
    """CONTRIBUTING.md: ``protocol/`` imports nothing of vcmc's but the exceptions, the model's layout and the
    option definitions (the typed configuration a silo receives is made of them), which themselves import
    only the exceptions, the closeness statistic's default level and the model's layout."""
    leaves = {"vcmc.exceptions", "vcmc.model"}
    options = {"vcmc.config.options", "vcmc.config.schema"}
    used = {t for m, targets in GRAPH.items() if m.startswith("vcmc.protocol") for t in targets
            if not t.startswith("vcmc.protocol")}
    assert used <= leaves | options, used
    assert GRAPH["vcmc.exceptions"] == set() and GRAPH["vcmc.model"] == set()
    assert GRAPH["vcmc.config.options"] <= {"vcmc.exceptions", "vcmc.closeness"}, GRAPH["vcmc.config.options"]
    assert GRAPH["vcmc.config.schema"] <= {"vcmc.config.options"}, GRAPH["vcmc.config.schema"]
    assert GRAPH["vcmc.closeness"] <= {"vcmc.model"}, GRAPH["vcmc.closeness"]


def _calls_of(attribute: str) -> list[str]:
    hits = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # llvmlite's IR builder (the numba intrinsics) has a ``call`` of its own
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == attribute
                    and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "builder")):
                hits.append(m)
    return sorted(set(hits))


def test_gather_is_the_one_place_replies_are_collected():
    """docs/design.md §12.1 and CONTRIBUTING.md: every stage of the server algorithm collects the silos'
    replies through ``vcmc.federation.faults.gather`` (which validates them and applies the fault policy);
    nothing else calls a transport's ``call``. The Flower ServerApp's hello round, which runs before
    there is a run to collect replies for, is the one other caller."""
    assert _calls_of("call") == ["vcmc.federation.faults", "vcmc.flower.server"]


#: Private names shared inside one package whose modules are one unit: the numba kernels of the sampler
#: (split over modules only for size; compiled together, never called from outside ``vcmc.mcmc.sampler``)
#: and the Dirichlet sampler they inline. Anything else shared is made public or moved.
PACKAGE_PRIVATE = ("vcmc.mcmc.sampler.", "vcmc.dirichlet")


def test_no_module_imports_another_modules_private_names():
    hits = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("vcmc"):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                own_submodule = f"{node.module}.{alias.name}" in MODULES and _package(node.module) == _package(m)
                kernels = m.startswith("vcmc.mcmc.sampler.") and node.module.startswith(PACKAGE_PRIVATE)
                if private and not own_submodule and not kernels:
                    hits.append(f"{m}: from {node.module} import {alias.name}")
    assert hits == [], "\n".join(hits)


def test_the_paths_from_a_flag_in_contributing_name_code_that_exists():
    """CONTRIBUTING.md lists the paths from --iterations and from the disclosure minimum to the code that
    uses them (traced call by call by tests/config/test_option_paths.py); every function it names exists
    (a rename must update it)."""
    import importlib

    text = (SRC.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## From a flag to the code that uses it", 1)[1].split("\n## ", 1)[0]
    for flag in ("`--iterations`", "`--min-cluster-size`"):
        assert flag in section, flag
    names = set(re.findall(r"`(vcmc\.[\w.]+)", section))
    assert len(names) >= 8
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):          # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            break
        else:  # pragma: no cover
            raise AssertionError(name)
