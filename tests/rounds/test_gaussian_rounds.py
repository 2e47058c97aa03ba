"""The global-informed rounds with Gaussian items (docs/design.md §17.8) end to end: the rounds recover a simulated
mixed design in the analyst's own session and in a deployment preview, a deployment withholds the draws of a
(cluster, item) observed in fewer rows than the minimum cluster size, and a value beyond the fixed-point grid is
refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

pytest.importorskip("cryptography")

import vcmc  # noqa: E402
from vcmc.config import config_from_mapping  # noqa: E402
from vcmc.research.simulate_mixed import simulate_mixed  # noqa: E402

MEANS = np.array([[-1.5, 0.0], [0.0, 1.5], [1.5, -1.0]])
SDS = np.array([[0.5, 0.7], [0.6, 0.5], [0.4, 0.6]])
CONFIG = {"sampler.n-iter": 400, "aggregation.max-iter": 60, "aggregation.rounds": 200,
          "aggregation.round-components": 5, "assessment.enabled": True}


@pytest.fixture(scope="module")
def mixed():
    return simulate_mixed([200, 250, 300], [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]], MEANS, SDS,
                          missing=0.03, rng=5)


def _check_recovered(result, silos, truth):
    assert result.diagnostics["rounds"]["n_rounds"] == 200 and result.n_clusters == 3
    assert adjusted_rand_score(truth.labels, np.concatenate(result.assignments)) > 0.9
    gd = result.gaussian_draws
    assert gd.shape[1:] == (3, 4)
    order = [int(np.argmin(np.abs(gd.mean(axis=0)[:, 0] - m))) for m in MEANS[:, 0]]
    means = gd[:, order, :2]
    np.testing.assert_allclose(means.mean(axis=0), MEANS, atol=0.15)
    np.testing.assert_allclose(np.sqrt(gd[:, order, 2:].mean(axis=0)), SDS, rtol=0.2)
    # the posterior's 95% intervals hold the means of the true clusters' rows
    x = np.vstack([s.values for s in silos])
    sample = np.stack([np.nanmean(x[truth.labels == k], axis=0) for k in range(3)])
    lo, hi = np.quantile(means, [0.025, 0.975], axis=0)
    assert np.all((lo <= sample) & (sample <= hi))
    assert len(result.diagnostics["ppc"]["continuous"]["table"]) == 4         # the assessment after the rounds


def test_the_rounds_recover_a_mixed_design_in_the_analysts_session(mixed):
    silos, truth = mixed
    result = vcmc.fit(silos, config=config_from_mapping(CONFIG), rng=1)
    assert not result.diagnostics["rounds"]["secure_sum"]
    assert not any("one-shot pass is the answer" in w for w in result.diagnostics["warnings"])
    _check_recovered(result, silos, truth)


def test_the_rounds_recover_a_mixed_design_in_a_deployment_preview(mixed):
    silos, truth = mixed
    # reproducible-rounds: the rounds' streams from the run's seed, so the test does not depend on the silos' group
    # secret (tests/rounds/test_secure_sum.py: the same chain as the analyst's to the bit)
    result = vcmc.fit(silos, config=config_from_mapping(CONFIG), rng=1, silo_policy={"reproducible-rounds": True})
    rounds = result.diagnostics["rounds"]
    assert rounds["secure_sum"] and rounds["gaussian_withheld"] == [[0, 0], [0, 0], [0, 0]]
    assert "Gaussian items' means and variances" in rounds["disclosed"]["answer"]
    _check_recovered(result, silos, truth)


def test_a_deployment_withholds_an_item_observed_in_fewer_rows_than_the_minimum(mixed):
    """X2 kept in only two rows per silo of the third cluster: a few rows on average in any component that holds
    them, under a minimum of 10; the analyst's own session keeps the chain's draws, a deployment sends the
    prior's and says so."""
    import dataclasses

    silos, truth = mixed
    cut, start = [], 0
    for s in silos:
        labels = truth.labels[start:start + s.n_rows]
        start += s.n_rows
        values = s.values.copy()
        values[np.flatnonzero(labels == 2)[2:], 1] = np.nan
        cut.append(dataclasses.replace(s, values=values))
    config = config_from_mapping({**CONFIG, "assessment.enabled": False, "privacy.min-cluster-size": 10})
    own = vcmc.fit(cut, config=config, rng=1)
    deployed = vcmc.fit(cut, config=config, rng=1, silo_policy={"min-cluster-size": 10, "reproducible-rounds": True})
    withheld = np.asarray(deployed.diagnostics["rounds"]["gaussian_withheld"])
    assert withheld.sum() == 1 and withheld[:, 0].sum() == 0            # X2 of one cluster, X1 everywhere kept
    k = int(np.flatnonzero(withheld[:, 1])[0])
    # a cluster of the third kind (the median: a stored round whose component briefly held few rows draws its mean
    # near the prior's)
    assert abs(np.median(deployed.gaussian_draws[:, k, 0]) - MEANS[2, 0]) < 0.2
    assert any("are the prior's" in w for w in deployed.diagnostics["warnings"])
    # the prior's draws of its X2 mean are wide (sd sqrt(sigma2 / kappa0), several units); the chain's are not
    assert deployed.gaussian_draws[:, k, 1].std() > 1.0
    # the analyst's chain: draws given the six rows that observe X2 there (heavy tails, a narrow middle)
    third = int(np.argmin(np.abs(np.median(own.gaussian_draws[:, :, 0], axis=0) - MEANS[2, 0])))
    quartiles = np.quantile(own.gaussian_draws[:, third, 1], [0.25, 0.75])
    assert quartiles[1] - quartiles[0] < 1.0
    assert "gaussian_withheld" not in own.diagnostics["rounds"]


def test_a_value_beyond_the_grid_is_refused_with_the_reason(mixed, caplog):
    """The silo refuses the round start (a data error: its text stays in the silo's log, as every data error's)."""
    import dataclasses
    import logging

    from vcmc.exceptions import SiloFailure

    silos, _ = mixed
    values = silos[0].values.copy()
    values[0, 1] = 80.0                                  # 80 scales from the location: beyond the grid's 64
    far = [dataclasses.replace(silos[0], values=values), *silos[1:]]
    with caplog.at_level(logging.ERROR, logger="vcmc.silo"), \
            pytest.raises(SiloFailure, match="'round start' failed.*DataError"):
        vcmc.fit(far, config=config_from_mapping({**CONFIG, "assessment.enabled": False}), rng=1)
    assert any("['X2'] have values more than 64 scales" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
