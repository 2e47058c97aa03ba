"""The method registry: names, shared apply steps, availability, and the Appendix-A matching check."""

from __future__ import annotations

import numpy as np
import pytest

from vcmc.exceptions import ConfigError
from vcmc.research.study.profiles import StudyProfile
from vcmc.research.study.registry import Registry, StudyMethod, default_registry, oracle_matching

NAMES = ["vcmc-calibrated", "vcmc-ball", "vcmc-hungarian", "vcmc-min-divergence", "consensus", "full-mcmc",
         "fed-kmodes", "fedmerdel", "discgs"]


def test_default_registry_names_and_groups():
    reg = default_registry()
    assert reg.names() == NAMES
    vcmc = [reg.get(n) for n in NAMES[:5]]
    assert {m.group for m in vcmc} == {"vcmc-apply"}
    assert [m.matching for m in vcmc] == ["calibrated", "ball", "hungarian", "min-divergence", None]
    assert all(reg.get(n).group is None for n in NAMES[5:])
    with pytest.raises(ConfigError, match="vcmc-ball"):
        reg.get("vcmc")


def test_unavailable_method_is_reported():
    reg = Registry()
    reg.add(StudyMethod("ghost", "Ghost", run=lambda *a, **k: None, modules=("vcmc.no_such_module",)))
    reg.add(StudyMethod("half-there", "H", run=lambda *a, **k: None, modules=("vcmc.metrics:no_such_fn",)))
    assert reg.available() == []
    with pytest.raises(ConfigError, match="ghost"):
        reg.check(["ghost"])
    with pytest.raises(ConfigError, match="not registered"):
        reg.add(StudyMethod("x", "X", run=lambda *a, **k: None, group="nope"))


def _profile(**kw):
    base = dict(name="t", n_iter=300, burn_in=150, thin=2, n_components=10, n_replicates=1, n_per_silo=300,
                oracle_draws=100)
    base.update(kw)
    return StudyProfile(**base)


def test_vcmc_variants_share_one_apply_step():
    pytest.importorskip("vcmc.pipeline")
    from vcmc.research.simulate import simulate_design

    reg = default_registry()
    prof = _profile()
    data = simulate_design("nested", "easy", rng=3, n_per_silo=prof.n_per_silo)
    shared = reg.groups["vcmc-apply"].prepare(data, seed=1, profile=prof)
    parts = shared.local_partitions()
    assert len(parts) == 4 and all(p.shape == (prof.n_per_silo,) for p in parts)
    results = {n: reg.get(n).run(data, seed=2, profile=prof, shared=shared) for n in NAMES[:4]}
    for name, res in results.items():
        assert res.assignments is not None, name
        assert res.timings["apply"] == shared.seconds          # the one apply step, reused
    assert results["vcmc-ball"].matching.method != results["vcmc-hungarian"].matching.method
    # the silos' local partitions did not change between the variants
    assert all(np.array_equal(a, b) for a, b in zip(parts, shared.local_partitions(), strict=True))


def test_oracle_matching_appendix_a():
    """With the true local partitions and well separated clusters, Ball and min-divergence recover the
    matching; Hungarian cannot in the non-nested design (its reference silo lacks a cluster and it
    opens no new one: the paper's 0%)."""
    pytest.importorskip("vcmc.research.study.evaluate")
    from vcmc.research.simulate import simulate_design

    prof = _profile(n_per_silo=1000)
    data = simulate_design("non-nested", "easy", rng=5)
    ball = oracle_matching(data, "ball", seed=1, profile=prof)
    assert ball == {"correct": True, "ari": pytest.approx(1.0), "n_global": 6}
    mind = oracle_matching(data, "min-divergence", seed=1, profile=prof)
    assert mind["correct"] and mind["n_global"] == 6
    hung = oracle_matching(data, "hungarian", seed=1, profile=prof)
    assert not hung["correct"] and hung["n_global"] == 5
