"""The estimator's StepMix-style statistics and its three-step models (docs/design.md §15)."""

import numpy as np
import pytest

from vcmc.estimator import FederatedLatentClassModel
from vcmc.lca.em import n_parameters
from vcmc.lca.simulate import ITEMS, simulate_lca
from vcmc.rows.lca import estep_sums


@pytest.mark.slow
def test_aic_bic_entropy_and_three_step_tables():
    sim = simulate_lca((400, 400, 400), rng=4)
    items = [df[list(ITEMS)].astype(str) for df in sim.frames]
    model = FederatedLatentClassModel(n_components=8, n_iter=2000, random_state=1)
    model.fit(items, covariates=[df[["age", "sex"]] for df in sim.frames],
              distal=[df[["death", "score"]] for df in sim.frames])
    assert model.n_clusters_ == 3
    pooled = sim.pooled[list(ITEMS)].astype(str)
    codes = model._codes(pooled)
    sums = estep_sums(codes, model.schema_.n_modalities, model.weights_, model.profiles_)
    p = n_parameters(3, model.schema_.n_modalities)
    n = len(pooled)
    assert model.aic(pooled) == pytest.approx(-2 * sums["loglik"] + 2 * p)
    assert model.bic(pooled) == pytest.approx(-2 * sums["loglik"] + p * np.log(n))
    assert 0 < model.entropy(pooled) < n * np.log(3)
    # bic and aic take what fit takes: the list of silos (issue 46)
    assert model.bic(items) == pytest.approx(model.bic(pooled))
    assert model.caic(items) == pytest.approx(model.bic(pooled) + p) and model.n_parameters == p
    assert list(model.covariates_.columns) == ["cluster", "term", "estimate", "se", "ci95_low", "ci95_high"]
    assert set(model.covariates_.term) == {"intercept", "age", "sex=m"}
    assert list(model.distal_.columns) == ["cluster", "outcome", "level", "estimate", "se", "ci95_low", "ci95_high"]
    assert (model.distal_tests_.p_value < 1e-6).all()


def test_a_failing_covariate_model_keeps_the_fit(monkeypatch):
    """The fit is never lost to its three-step models: the failure is a warning and a missing table."""
    from vcmc.exceptions import ConvergenceError
    from vcmc.lca import analysis

    def fail(*args, **kwargs):
        raise ConvergenceError("covariate model: the information matrix is not positive definite at the estimate")

    monkeypatch.setattr(analysis, "fit_covariates", fail)
    sim = simulate_lca((150, 150), rng=5)
    items = [df[list(ITEMS)].astype(str) for df in sim.frames]
    model = FederatedLatentClassModel(n_components=6, n_iter=300, random_state=1, rounds=1)
    with pytest.warns(UserWarning, match="covariate model was not fitted.*fit is kept"):
        model.fit(items, covariates=[df[["age"]] for df in sim.frames], distal=[df[["death"]] for df in sim.frames])
    assert model.covariates_ is None and model.distal_ is not None and model.n_clusters_ >= 1
    assert model.three_step_warnings_
