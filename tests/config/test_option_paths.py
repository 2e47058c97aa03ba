"""The paths from ``--iterations`` and ``--min-cluster-size`` to the code that uses them, as CONTRIBUTING.md
lists them: traced call by call (``sys.setprofile``) in a real ``vcmc fit``.

A call is a Python stack frame. Each leg is pinned by its two ends and a most number of calls (4), not by its
exact stack, so a refactor that keeps a leg short passes: from the command line to the option's dataclass,
and from the silo's summarize endpoint (or its one entry point, for the gate) to the code that reads the
value; between them the configuration travels unchanged through ``gather`` and the transport, by the same
calls for every option.
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"
ITERATIONS, MINIMUM = 60, 3

MAIN = "vcmc.cli.main"
MOST = 4
"""Most calls (Python stack frames) of a leg: from its start to the code that reads or stores the value."""
ANSWER = "vcmc.silo.endpoints.summarize.answer"
LEGS = {
    # key of the place traced: (where the leg starts, the code at its end)
    "sampler-config": (MAIN, "vcmc.config.options.SamplerConfig"),
    "privacy-config": (MAIN, "vcmc.config.options.PrivacyConfig"),
    "run_chain": (ANSWER, "vcmc.mcmc.sampler.driver.run_chain"),
    "apply_min_cluster_size": (ANSWER, "vcmc.disclosure.apply_min_cluster_size"),
    "admit": ("vcmc.silo.local.LocalSilo.handle", "vcmc.silo.endpoints.summarize.admit"),
    "release": ("vcmc.silo.local.LocalSilo.handle", "vcmc.silo.endpoints.summarize.release"),
}
BOUNDARY = ("vcmc.cli.fit.run", "vcmc.federation.faults.gather", "vcmc.silo.local.LocalSilo.handle", ANSWER)
"""The configuration crosses the boundary through ``gather`` and the silo's one entry point, unchanged."""
WHOLE = 12
"""Most calls from the command line to the sampler's loop."""


def _name(frame) -> str:
    code = frame.f_code
    if code.co_name == "__init__" and "self" in frame.f_locals:     # a dataclass constructor: its class
        cls = type(frame.f_locals["self"])
        return f"{cls.__module__}.{cls.__qualname__}"
    return f"{frame.f_globals.get('__name__')}.{code.co_qualname}"


def _stack(frame) -> list[str]:
    out = []
    while frame is not None:
        out.append(_name(frame))
        frame = frame.f_back
    return out[::-1]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The stack at each place the two values are stored or read, in a real in-process ``vcmc fit``."""
    from vcmc.cli import main

    folder = tmp_path_factory.mktemp("paths")
    rng = np.random.default_rng(3)
    files = []
    for s in range(2):
        path = folder / f"s{s}.csv"
        pd.DataFrame({f"v{j}": rng.choice(["a", "b"], 60) for j in range(4)}).to_csv(path, index=False)
        files.append(str(path))
    seen: dict[str, list[str]] = {}

    def record(key, frame):
        seen.setdefault(key, _stack(frame))

    def profile(frame, event, arg):
        if event != "call":
            return
        code, local = frame.f_code, frame.f_locals
        if code.co_name == "__init__" and "self" in local:
            kind = type(local["self"]).__name__
            if kind == "SamplerConfig" and local.get("n_iter") == ITERATIONS:
                record("sampler-config", frame)
            elif kind == "PrivacyConfig" and local.get("min_cluster_size") == MINIMUM:
                record("privacy-config", frame)
        elif code.co_name == "run_chain" and local["sampler"].n_iter == ITERATIONS:
            record("run_chain", frame)
        elif code.co_name == "apply_min_cluster_size" and local["privacy"].min_cluster_size == MINIMUM:
            record("apply_min_cluster_size", frame)
        elif _name(frame) == LEGS["admit"][1] and local["request"].config.sampler.n_iter == ITERATIONS:
            record("admit", frame)
        elif _name(frame) == LEGS["release"][1] and local["gate"].min_size == MINIMUM:
            record("release", frame)

    sys.setprofile(profile)
    try:
        rc = main(["fit", *files, "--iterations", str(ITERATIONS), "--min-cluster-size", str(MINIMUM),
                   "--jobs", "1", "--seed", "1", "--no-assessment", "--out", str(folder / "out")])
    finally:
        sys.setprofile(None)
    assert rc == 0
    return seen


def _from(stack: list[str], start: str) -> tuple[str, ...]:
    return tuple(stack[stack.index(start):])


def _leg(start: str, end: str) -> str:
    return f"from `{start}` to `{end}` in at most {MOST} calls"


@pytest.mark.parametrize("key", list(LEGS))
def test_each_leg_is_at_most_4_calls_and_contributing_names_it(traced, key):
    start, end = LEGS[key]
    path = _from(traced[key], start)
    assert path[-1] == end
    assert len(path) - 1 <= MOST, " -> ".join(path)
    text = " ".join(CONTRIBUTING.read_text(encoding="utf-8").split())
    assert _leg(start, end) in text, f"CONTRIBUTING.md does not say {_leg(start, end)}"


def test_between_the_legs_the_configuration_crosses_the_boundary_by_the_listed_calls(traced):
    stack = traced["run_chain"]
    whole = _from(stack, MAIN)
    positions = [whole.index(name) for name in BOUNDARY]
    assert positions == sorted(positions), " -> ".join(whole)
    assert len(whole) - 1 <= WHOLE, " -> ".join(whole)
    text = " ".join(CONTRIBUTING.read_text(encoding="utf-8").split())
    assert f"at most {WHOLE} calls in all" in text
    assert all(f"`{name}`" in text for name in BOUNDARY)
