"""The result files' contract: result.json keys, assignments.csv and profiles.csv columns, NetCDF."""

import json

import numpy as np
import pandas as pd

from vcmc.report import write_outputs
from vcmc.results import GlobalResult


def make_result(rng):
    t, c, n_mod = 200, 3, (2, 3)
    pi = rng.dirichlet([30, 20, 10], size=t)
    prof = np.concatenate([rng.dirichlet([5, 5], size=(t, c)), rng.dirichlet([2, 3, 4], size=(t, c))], axis=2)
    assignments = (rng.integers(0, c, size=7), rng.integers(0, c, size=5))
    counts = np.stack([np.bincount(a, minlength=c) for a in assignments])
    return GlobalResult.from_draws(pi_draws=pi, profile_draws=prof, method="vcmc", n_modalities=n_mod,
                                   silos=("a", "b"), partition_counts=counts, assignments=assignments,
                                   timings={"apply": 1.0, "matching": 0.1, "aggregation": 0.2, "total": 1.3},
                                   config={"x": 1}, seed=4, diagnostics={"elbo": np.float64(2.5)})


def test_files_follow_the_contract(tmp_path, rng):
    res = make_result(rng)
    paths = write_outputs(res, tmp_path)
    summary = json.loads(paths["result"].read_text())
    assert summary["n_clusters"] == res.n_clusters
    assert set(summary["timings_s"]) >= {"apply", "matching", "aggregation", "total"}
    assert summary["seed"] == 4 and summary["config"] == {"x": 1}
    first = summary["clusters"][0]
    assert set(first) >= {"weight", "weight_ci95", "size"}
    lo, hi = first["weight_ci95"]
    assert lo <= first["weight"] <= hi
    assert sum(cl["size"] for cl in summary["clusters"]) == 12

    assign = pd.read_csv(paths["assignments"])
    assert list(assign.columns) == ["silo", "row", "cluster"]
    assert assign[assign.silo == "a"].row.tolist() == list(range(7))
    np.testing.assert_array_equal(assign[assign.silo == "b"].cluster.to_numpy(), res.assignments[1] + 1)

    prof = pd.read_csv(paths["profiles"])
    assert list(prof.columns) == ["cluster", "variable", "modality", "estimate", "ci95_low", "ci95_high"]
    assert len(prof) == 3 * 5
    sums = prof.groupby(["cluster", "variable"]).estimate.sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0)
    assert (prof.ci95_low <= prof.estimate).all() and (prof.estimate <= prof.ci95_high).all()


def test_netcdf_round_trip(tmp_path, rng):
    import arviz as az

    res = make_result(rng)
    paths = write_outputs(res, tmp_path)
    tree = az.from_netcdf(paths["posterior"])
    pi = tree["posterior"]["pi"].values
    assert pi.shape == (1, 200, 3)
    np.testing.assert_allclose(pi[0], res.pi_draws)
