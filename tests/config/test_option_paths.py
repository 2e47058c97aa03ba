"""The paths from ``--iterations`` and ``--min-cluster-size`` to the code that uses them, as CONTRIBUTING.md
lists them: traced call by call (``sys.setprofile``) in a real ``vcmc fit``.

A call is a Python stack frame. The paths are checked exactly (so a new hop fails here and the document
must say it) and each leg is at most 4 calls: from the flag to the option's dataclass, and from the silo's
summarize handler (or its gate) to the code that reads the value; between them the configuration travels
unchanged through the transport, by the same calls for every option.
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"
ITERATIONS, MINIMUM = 60, 3

MAIN = "vcmc.cli.main"
FLAG_TO_SAMPLER = (MAIN, "vcmc.cli.fit.run", "vcmc.cli.fit.config_from_args",
                   "vcmc.config.mapping.config_from_mapping", "vcmc.config.options.SamplerConfig")
FLAG_TO_PRIVACY = (*FLAG_TO_SAMPLER[:-1], "vcmc.config.options.PrivacyConfig")
BOUNDARY = ("vcmc.cli.fit.run", "vcmc.api.fit", "vcmc.pipeline.run_vcmc", "vcmc.pipeline.summarize_silos",
            "vcmc.federation.faults.gather", "vcmc.federation.transport.InProcessTransport.call",
            "vcmc.silo.local.LocalSilo.handle", "vcmc.silo.local.LocalSilo._answer_summarize")
HANDLER_TO_SAMPLER = ("vcmc.silo.local.LocalSilo._answer_summarize", "vcmc.silo.local.LocalSilo._summarize",
                      "vcmc.silo.apply.run_apply_step", "vcmc.silo.apply.run_relabelled_chain",
                      "vcmc.silo.sampler.driver.run_chain")
HANDLER_TO_MINIMUM = ("vcmc.silo.local.LocalSilo._answer_summarize", "vcmc.silo.local.LocalSilo._summarize",
                      "vcmc.silo.disclosure.apply_min_cluster_size")
GATE_ADMIT = ("vcmc.silo.local.LocalSilo.handle", "vcmc.silo.gate.Gate.admit", "vcmc.silo.gate._admit_summarize")
GATE_RELEASE = ("vcmc.silo.local.LocalSilo.handle", "vcmc.silo.gate.Gate.release",
                "vcmc.silo.gate._release_summary")


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
        elif code.co_name == "_admit_summarize" and local["request"].config.sampler.n_iter == ITERATIONS:
            record("admit", frame)
        elif code.co_name == "_release_summary" and local["gate"].min_size == MINIMUM:
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


def _as_written(path) -> str:
    return " -> ".join(f"`{n}`" for n in path)


@pytest.mark.parametrize(("key", "path"), [
    ("sampler-config", FLAG_TO_SAMPLER), ("privacy-config", FLAG_TO_PRIVACY),
    ("run_chain", HANDLER_TO_SAMPLER), ("apply_min_cluster_size", HANDLER_TO_MINIMUM),
    ("admit", GATE_ADMIT), ("release", GATE_RELEASE),
])
def test_each_leg_is_the_listed_path_of_at_most_4_calls(traced, key, path):
    assert _from(traced[key], path[0]) == path
    assert len(path) - 1 <= 4
    text = " ".join(CONTRIBUTING.read_text(encoding="utf-8").split())
    assert _as_written(path) in text, f"CONTRIBUTING.md does not list {_as_written(path)}"


def test_between_the_legs_the_configuration_crosses_the_boundary_by_the_listed_calls(traced):
    stack = traced["run_chain"]
    assert _from(stack, BOUNDARY[0])[:len(BOUNDARY)] == BOUNDARY
    text = " ".join(CONTRIBUTING.read_text(encoding="utf-8").split())
    assert _as_written(BOUNDARY) in text
    # the whole stack, from the command line to the sampler's loop, as the document counts it
    whole = _from(stack, MAIN)
    assert len(whole) - 1 == 12 and f"{len(whole) - 1} calls in all" in text
