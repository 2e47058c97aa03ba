"""The generalisation suite: its designs, and the quick profile run end to end with its verdicts."""

import json

import numpy as np
import pandas as pd
import pytest

from vcmc.research.study.designs import GENERALISATION_DESIGNS, QUICK_DESIGNS, get_design
from vcmc.research.study.profiles import get_profile, normalise_scenario
from vcmc.research.study.runner import cell_seed


def test_the_suite_spans_the_shapes_it_promises():
    ds = list(GENERALISATION_DESIGNS.values())
    assert {d.n_silos for d in ds} >= {2, 4, 8, 16, 30}
    n_vars = {len(d.n_modalities) for d in ds}
    assert min(n_vars) <= 10 and max(n_vars) >= 80 and {25, 50} <= n_vars
    assert {k for d in ds for k in d.n_modalities} == {2, 3, 4, 5, 6}
    assert any(d.profile == "sparse-binary" for d in ds)
    sizes = [s for d in ds for s in d.silo_sizes]
    assert min(sizes) <= 200 and max(sizes) >= 10_000
    assert any(len(set(d.silo_sizes)) > 1 for d in ds)
    ks = [d.n_clusters for d in ds]
    assert min(ks) <= 3 and max(ks) >= 27
    smallest = min(min(np.average(np.asarray(d.weights), axis=0, weights=d.silo_sizes)) for d in ds)
    assert smallest <= 0.0051
    one_silo = [d for d in ds if ((np.asarray(d.weights) > 0).sum(axis=0) == 1).any()]
    spread = [d for d in ds if ((np.asarray(d.weights) > 0).sum(axis=0) == d.n_silos).all()]
    assert one_silo and spread
    assert {d.name.split("/")[1] for d in ds} >= {"easy", "poor"}
    for d in ds:
        assert d.n_components >= 1.5 * d.n_clusters or d.n_components >= 15


def test_a_design_is_a_scenario_with_its_own_seeds_and_data():
    name = "regional/poor"
    assert normalise_scenario(name) == name
    assert cell_seed(1, name, 0).spawn_key != cell_seed(1, "sixteen-small/easy", 0).spawn_key
    assert cell_seed(1, "nested/poor", 0).spawn_key == (3, 0)     # the paper's seeds do not move
    d = get_design(name)
    a, b = d.simulate(5), d.simulate(5)
    np.testing.assert_array_equal(a.pooled_codes, b.pooled_codes)
    assert a.n_per_silo == d.silo_sizes
    assert not np.array_equal(a.pooled_codes[:100], d.simulate(6).pooled_codes[:100])
    assert (np.asarray(a.weights) > 0).sum(axis=0).tolist() == (np.asarray(d.weights) > 0).sum(axis=0).tolist()


@pytest.mark.slow
def test_quick_profile_runs_and_the_default_beats_the_papers_ball(tmp_path):
    from vcmc.cli import main

    out = tmp_path / "gen"
    assert main(["study", "--profile", "generalisation-quick", "--out", str(out), "--jobs", "2"]) == 0
    t = pd.read_csv(out / "tables" / "generalisation.csv")
    assert set(t["design"]) == set(QUICK_DESIGNS)
    assert set(t["method"]) == set(get_profile("generalisation-quick").methods)
    wide = t[t["design"] == "wide-20x4/easy"].set_index("method")
    # the first case: the paper's radius leaves single-silo copies, the default does not
    assert wide.loc["vcmc-ball", "fragments_any_total"] > 10
    assert wide.loc["vcmc-calibrated", "fragments_total"] == 0
    assert wide.loc["vcmc-calibrated", "d_ari_vs_full"] > -0.03
    assert abs(wide.loc["vcmc-calibrated", "k_mean"] - wide.loc["full-mcmc", "k_mean"]) <= 1
    verdict = json.loads((out / "tables" / "generalisation_verdict.json").read_text())
    assert verdict["default"] == "vcmc-calibrated" and verdict["passes"]["wide-20x4/easy"]
    assert (out / "figures" / "generalisation.png").stat().st_size > 5000
    md = (out / "tables" / "generalisation.md").read_text()
    assert "wide-20x4/easy" in md and "**pass**" in md
