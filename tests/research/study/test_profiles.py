"""Study profiles: the paper's protocol read from the reference, overrides, scenario names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vcmc.exceptions import ConfigError
from vcmc.research.study.profiles import SCENARIOS, get_profile, normalise_scenario, paper_profile, quick_profile

SHARED_JSON = Path("/work/shared/reference/paper_tables.json")


def test_paper_profile_is_the_papers_protocol():
    prof = paper_profile()
    if SHARED_JSON.exists():
        proto = json.loads(SHARED_JSON.read_text())["protocol"]
        assert (prof.n_iter, prof.burn_in, prof.n_components, prof.n_replicates, prof.n_per_silo) == (
            proto["mcmc_iterations"], proto["burn_in"], proto["C_plus"], proto["datasets_per_scenario"],
            proto["n_per_shard"])
    assert prof.thin == 5            # paper section 7.3.1
    cfg = prof.fit_config(matching="hungarian")
    assert cfg.sampler.n_iter == prof.n_iter and cfg.sampler.burn_in == prof.burn_in
    assert cfg.matching.method == "hungarian" and cfg.prior.fractionate
    assert not prof.fit_config(fractionate=False).prior.fractionate
    assert set(prof.scenarios) == set(SCENARIOS) and len(SCENARIOS) == 6


def test_quick_profile_is_short():
    q = quick_profile()
    assert q.n_iter < paper_profile().n_iter // 10 and q.n_replicates == 2
    assert {"vcmc-ball", "vcmc-hungarian", "vcmc-min-divergence", "full-mcmc"} <= set(q.methods)
    assert get_profile("quick") == q
    with pytest.raises(ConfigError, match="'profile'"):
        get_profile("fast")


@pytest.mark.parametrize(("name", "expected"), [
    ("nested/easy", "nested/easy"), ("non-nested/poor", "non_nested/poor"),
    ("Non_Nested/Hard", "non_nested/poor"), ("hom/easy", "homogeneous/easy")])
def test_scenario_spellings(name, expected):
    assert normalise_scenario(name) == expected


@pytest.mark.parametrize("bad", ["nested", "nested/medium", "circular/easy"])
def test_bad_scenario_names_the_valid_ones(bad):
    with pytest.raises(ConfigError, match="homogeneous/easy"):
        normalise_scenario(bad)


def test_overrides():
    p = paper_profile()
    q = p.with_overrides(methods=["full-mcmc"], n_replicates=20)
    assert q.name == "paper" and q.methods == ("full-mcmc",) and q.n_replicates == 20
    assert q.fingerprint() == p.fingerprint()          # same numbers: a resume may extend it
    r = p.with_overrides(n_iter=1000, burn_in=500)
    assert r.name == "paper+custom" and r.fingerprint() != p.fingerprint()
    assert p.with_overrides(n_iter=None) is p
    with pytest.raises(ConfigError, match="burn_in"):
        p.with_overrides(n_iter=1000)                     # burn-in 25,000 >= 1,000 iterations
    with pytest.raises(ConfigError, match="'n_replicates'"):
        p.with_overrides(n_replicates=0)
