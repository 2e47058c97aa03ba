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


def test_netcdf_keeps_chains_chain_major(tmp_path, rng):
    import dataclasses

    import arviz as az

    res = dataclasses.replace(make_result(rng), n_chains=2)
    tree = az.from_netcdf(write_outputs(res, tmp_path)["posterior"])
    pi = tree["posterior"]["pi"].values
    assert pi.shape == (2, 100, 3)
    np.testing.assert_array_equal(pi[1], res.pi_draws[100:])
    np.testing.assert_array_equal(tree["posterior"]["profiles"].values[0], res.profile_draws[:100])


def test_schema_and_memberships_are_written_and_checks_carry_the_schema_names(tmp_path, rng):
    import dataclasses

    from vcmc.data import Schema, Variable

    res = make_result(rng)
    memberships = tuple(np.eye(3)[a] * 0.7 + 0.1 for a in res.assignments)
    diag = {"ppc": {"prevalence": {"table": [{"column": 4, "silo": "pooled"}]},
                    "pairs": {"table": [{"column_a": 1, "column_b": 3, "silo": "a"}]}}}
    res = dataclasses.replace(res, memberships=memberships, diagnostics=diag)
    schema = Schema((Variable("smoker", ("no", "yes")), Variable("bmi", ("low", "mid", "high"))))
    paths = write_outputs(res, tmp_path, schema=schema)
    assert Schema.from_json(paths["schema"]) == schema
    summary = json.loads(paths["result"].read_text())
    assert summary["diagnostics"]["ppc"]["prevalence"]["table"][0] == {
        "column": 4, "silo": "pooled", "variable": "bmi", "modality": "high"}
    pair = summary["diagnostics"]["ppc"]["pairs"]["table"][0]
    assert (pair["variable_a"], pair["modality_a"], pair["variable_b"], pair["modality_b"]) == \
        ("smoker", "yes", "bmi", "mid")
    assign = pd.read_csv(paths["assignments"])
    assert list(assign.columns) == ["silo", "row", "cluster", "probability"]
    np.testing.assert_allclose(assign.probability, 0.8)
    member = pd.read_csv(paths["memberships"])
    assert list(member.columns) == ["silo", "row", "p_1", "p_2", "p_3"] and len(member) == 12
