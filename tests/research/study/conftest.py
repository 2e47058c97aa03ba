"""Fake study methods with known answers, and a registry holding them.

``truth`` returns the true partition and parameters with intervals that contain them: ARI 1, VI 0,
relative bias 0, coverage 1 by construction. ``one-cluster`` puts every row in one cluster. ``half``
returns the truth with every weight halved (relative bias (true - est)/true = 0.5 exactly) and intervals
that miss it. ``counting`` records every call in a log (for the resume tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vcmc.research.study.profiles import StudyProfile
from vcmc.research.study.registry import Registry, StudyGroup, StudyMethod
from vcmc.results import GlobalResult


def _result(dataset, *, weights, profiles, assignments, w_ci=None, p_ci=None, name="fake"):
    labels = list(assignments)
    c = weights.shape[0]
    counts = np.stack([np.bincount(a, minlength=c) for a in labels])
    return GlobalResult(method=name, n_modalities=tuple(dataset.n_modalities),
                        silos=tuple(s.name for s in dataset.silos), weights=weights, profiles=profiles,
                        partition_counts=counts, weights_ci=w_ci, profiles_ci=p_ci,
                        assignments=tuple(labels), timings={"total": 0.0})


def truth_method(dataset, *, seed, profile, shared=None):
    w = np.asarray(dataset.global_weights, dtype=float)
    p = np.asarray(dataset.profiles, dtype=float)
    w_ci = np.stack([w * 0.9, w * 1.1], axis=1)
    p_ci = np.stack([p * 0.9, p * 1.1], axis=-1)
    return _result(dataset, weights=w, profiles=p, assignments=dataset.labels, w_ci=w_ci, p_ci=p_ci,
                   name="truth")


def half_method(dataset, *, seed, profile, shared=None):
    w = np.asarray(dataset.global_weights, dtype=float) / 2
    p = np.asarray(dataset.profiles, dtype=float) / 2
    w_ci = np.stack([w * 0.9, w * 1.1], axis=1)        # [0.45, 0.55] x true: never covers it
    p_ci = np.stack([p * 0.9, p * 1.1], axis=-1)
    return _result(dataset, weights=w, profiles=p, assignments=dataset.labels, w_ci=w_ci, p_ci=p_ci,
                   name="half")


def one_cluster_method(dataset, *, seed, profile, shared=None):
    p = np.asarray(dataset.profiles, dtype=float)[:1]
    return _result(dataset, weights=np.ones(1), profiles=p,
                   assignments=[np.zeros_like(lab) for lab in dataset.labels], name="one")


class CallLog:
    """Appends one JSON line per call to a file (works across processes)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __call__(self, kind, dataset, seed):
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": kind, "design": dataset.design, "sep": dataset.separability,
                                 "seed": int(seed), "n": int(dataset.silos[0].codes.shape[0])}) + "\n")

    def lines(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]


def make_registry(log: CallLog | None = None, *, fail_on: set | None = None,
                  interrupt_after: int | None = None):
    """A registry of the fake methods; ``counting-a``/``counting-b`` share the group ``g`` (its prepare
    is logged as ``prepare``), ``fails`` raises on the replicates in ``fail_on``; after
    ``interrupt_after`` logged method calls a KeyboardInterrupt simulates a kill."""
    reg = Registry()
    calls = {"n": 0}

    def logged(kind, fn):
        def run(dataset, *, seed, profile, shared=None):
            if interrupt_after is not None and calls["n"] >= interrupt_after:
                raise KeyboardInterrupt
            calls["n"] += 1
            if log is not None:
                log(kind, dataset, seed)
            return fn(dataset, seed=seed, profile=profile, shared=shared)
        return run

    def prepare(dataset, *, seed, profile):
        if log is not None:
            log("prepare", dataset, seed)
        return {"seed": seed}

    def fails(dataset, *, seed, profile, shared=None):
        if fail_on and (dataset.design, dataset.separability) in fail_on:
            raise ValueError("deliberate failure of the test method")
        return truth_method(dataset, seed=seed, profile=profile)

    reg.add_group(StudyGroup("g", prepare))
    reg.add(StudyMethod("truth", "Truth", logged("truth", truth_method)))
    reg.add(StudyMethod("half", "Half", logged("half", half_method)))
    reg.add(StudyMethod("one-cluster", "One cluster", logged("one-cluster", one_cluster_method)))
    reg.add(StudyMethod("counting-a", "A", logged("counting-a", truth_method), group="g"))
    reg.add(StudyMethod("counting-b", "B", logged("counting-b", truth_method), group="g"))
    reg.add(StudyMethod("fails", "Fails", logged("fails", fails)))
    return reg


def tiny_profile(methods=("truth",), scenarios=("homogeneous/easy", "nested/poor"), replicates=3, n=60):
    return StudyProfile(name="test", n_iter=20, burn_in=10, thin=1, n_components=4, n_replicates=replicates,
                        n_per_silo=n, methods=tuple(methods), scenarios=tuple(scenarios), oracle_draws=10)


@pytest.fixture
def call_log(tmp_path):
    return CallLog(tmp_path / "calls.jsonl")


@pytest.fixture(scope="session")
def helpers():
    """The helpers of this conftest (test modules cannot import it under --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(make_registry=make_registry, tiny_profile=tiny_profile, CallLog=CallLog,
                           truth_method=truth_method)


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """A study folder of the fake methods: two scenarios x 3 replicates; ``truth`` is also registered as
    ``full-mcmc`` and ``half`` as ``vcmc-ball`` so that the paper's values appear beside them."""
    from vcmc.research.study.runner import load_cells, run_study

    reg = make_registry()
    reg.add(StudyMethod("full-mcmc", "Full MCMC", reg.methods["truth"].run))
    reg.add(StudyMethod("vcmc-ball", "VCMC (Ball)", reg.methods["half"].run))
    prof = tiny_profile(methods=("truth", "half", "one-cluster", "full-mcmc", "vcmc-ball"), replicates=3,
                            scenarios=("homogeneous/easy", "non_nested/poor"))
    out = tmp_path_factory.mktemp("study")
    run_study(prof, out=out, root_seed=21, registry=reg, progress=False)
    return out, load_cells(out)
