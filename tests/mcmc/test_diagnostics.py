"""ArviZ diagnostics of label-invariant quantities and relabelled weights."""

import warnings

import numpy as np

from vcmc.mcmc.diagnostics import chain_diagnostics, local_diagnostics, rhat, to_datatree
from vcmc.mcmc.posterior import LocalPosterior


def test_independent_chains_from_one_distribution_look_converged():
    rng = np.random.default_rng(0)
    lp = rng.normal(size=(4, 500))
    n_occ = rng.integers(5, 8, size=(4, 500))
    pi = rng.dirichlet([5, 3, 2], size=(4, 500))
    d = chain_diagnostics(lp, n_occ, pi)
    assert d["rhat_log_posterior"] < 1.01
    assert d["rhat_n_occupied"] < 1.01
    assert d["rhat_pi_max"] < 1.01
    # iid draws: ESS close to the 2000 draws (ArviZ's estimator is noisy; +-25% is generous)
    assert 1500 < d["ess_bulk_log_posterior"] < 2600
    assert 1200 < d["ess_tail_log_posterior"] < 2800
    assert d["n_chains"] == 4 and d["n_kept"] == 500


def test_chains_stuck_in_different_places_are_flagged():
    rng = np.random.default_rng(1)
    lp = rng.normal(size=(2, 400)) + np.array([[0.0], [3.0]])
    d = chain_diagnostics(lp, rng.integers(5, 8, size=(2, 400)))
    assert d["rhat_log_posterior"] > 1.5


def test_one_chain_is_split_in_halves():
    rng = np.random.default_rng(2)
    drift = np.linspace(0, 5, 600)[None, :] + rng.normal(size=(1, 600))
    assert float(rhat(drift)) > 1.3
    assert float(rhat(rng.normal(size=(1, 600)))) < 1.02


def test_constant_quantity_gives_nan_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = chain_diagnostics(np.random.default_rng(3).normal(size=(2, 100)), np.full((2, 100), 6))
    assert np.isnan(d["rhat_n_occupied"])
    assert np.isfinite(d["rhat_log_posterior"])


def _local(n_chains=2, n_kept=50, k=3, seed=4):
    rng = np.random.default_rng(seed)
    n_mod = (2, 3)
    t = n_chains * n_kept
    prof = np.concatenate([rng.dirichlet(np.ones(2), size=(t, k)), rng.dirichlet(np.ones(3), size=(t, k))],
                          axis=2)
    return LocalPosterior(partition=np.arange(30) % k, membership=np.full((30, k), 1 / k),
                          pi_draws=rng.dirichlet(np.ones(k), size=t), profile_draws=prof,
                          n_occupied=rng.integers(3, 5, size=(n_chains, n_kept)),
                          log_posterior=rng.normal(size=(n_chains, n_kept)), n_modalities=n_mod,
                          n_components=8)


def test_local_diagnostics_reads_chain_major_draws():
    local = _local()
    d = local_diagnostics(local)
    expected = chain_diagnostics(local.log_posterior, local.n_occupied, local.pi_draws.reshape(2, 50, 3))
    assert d.keys() == expected.keys()
    for key in d:
        np.testing.assert_equal(d[key], expected[key])


def test_datatree_has_the_documented_dims_and_no_row_data():
    local = _local()
    dt = to_datatree(local)
    post = dt["posterior"]
    assert post["pi"].dims == ("chain", "draw", "cluster")
    assert post["profiles"].dims == ("chain", "draw", "cluster", "column")
    assert post["profiles"].shape == (2, 50, 3, 5)
    assert list(post["profiles"].coords["column"].values) == ["q0=0", "q0=1", "q1=0", "q1=1", "q1=2"]
    np.testing.assert_array_equal(post["pi"].values.reshape(100, 3), local.pi_draws)
    assert dt["sample_stats"]["n_occupied"].dims == ("chain", "draw")
    assert 30 not in post["pi"].shape and 30 not in post["profiles"].shape


def test_datatree_names_columns_after_the_schema():
    from vcmc.data.schema import Schema

    dt = to_datatree(_local(), schema=Schema.from_n_modalities((2, 3)))
    columns = list(dt["posterior"]["profiles"].coords["column"].values)
    assert columns == ["V1=1", "V1=2", "V2=1", "V2=2", "V2=3"]


def test_diagnostics_are_arviz_own_without_its_plotting_half():
    """R-hat and ESS come from ``arviz_stats`` (what ``arviz.rhat``/``arviz.ess`` are): the same numbers as
    ArviZ's public functions, and a silo's process computing them never imports matplotlib."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from vcmc.mcmc.diagnostics import ess, rhat
x = np.random.default_rng(3).normal(size=(2, 300, 3)).cumsum(axis=1)
got = (rhat(x), ess(x), ess(x, method="tail"))
assert "matplotlib" not in sys.modules and "arviz_plots" not in sys.modules, "plotting imported"
import arviz
want = (arviz.rhat(x, chain_axis=0, draw_axis=1), arviz.ess(x, chain_axis=0, draw_axis=1),
        arviz.ess(x, method="tail", prob=(0.05, 0.95), chain_axis=0, draw_axis=1))
for g, w in zip(got, want):
    np.testing.assert_array_equal(g, np.asarray(w, dtype=np.float64))
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
