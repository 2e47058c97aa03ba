"""The federated latent class analysis: exact federation, recovered effects, StepMix's statistics, clear errors."""

import numpy as np
import pandas as pd
import pytest

from vcmc.exceptions import DataError
from vcmc.federation.transport import InProcessTransport
from vcmc.lca.analysis import analyse, compare, lca_silos
from vcmc.lca.em import estep, fit_lca, n_parameters
from vcmc.lca.simulate import TRUE_BETA, TRUE_DEATH, TRUE_SCORE, simulate_lca
from vcmc.lca.statistics import fit_statistics

AUX = dict(covariates="age,sex", distal="death,score")


def _text(df: pd.DataFrame) -> pd.DataFrame:
    """A frame as ``vcmc fit`` reads a file: every cell text, missing cells empty."""
    return df.astype(object).where(df.notna(), "").astype(str).replace("<NA>", "")


def _silos(frames, **kw):
    return lca_silos({f"site{i}": _text(df) for i, df in enumerate(frames)}, **kw)


@pytest.fixture(scope="module")
def sim():
    return simulate_lca((220, 180, 260, 200, 240), missing=0.05, rng=7)


def test_five_silos_give_the_pooled_sums_and_fit(sim):
    five, cov5, dis5 = _silos(sim.frames, **AUX)
    one, cov1, dis1 = _silos([sim.pooled], **AUX)
    t5, t1 = InProcessTransport(five), InProcessTransport(one)
    rng = np.random.default_rng(0)
    pi = rng.dirichlet(np.ones(3))
    prof = np.hstack([rng.dirichlet(np.ones(m), size=3) for m in five[0].n_modalities])
    a, b = estep(t5.call, list(t5.silos), pi, prof), estep(t1.call, list(t1.silos), pi, prof)
    assert a.n_rows == b.n_rows == 1100
    np.testing.assert_allclose(a.cluster, b.cluster, rtol=1e-12)
    np.testing.assert_allclose(a.modality, b.modality, rtol=1e-12, atol=1e-12)
    assert a.loglik == pytest.approx(b.loglik, rel=1e-13) and a.entropy == pytest.approx(b.entropy, rel=1e-12)
    # the whole analysis, same seed: the same estimates (sums differ only by the order of additions)
    r5 = analyse(five, 3, covariates=cov5, distal=dis5, n_starts=3, rng=11)
    r1 = analyse(one, 3, covariates=cov1, distal=dis1, n_starts=3, rng=11)
    assert r5.fit.loglik == pytest.approx(r1.fit.loglik, rel=1e-10)
    np.testing.assert_allclose(r5.fit.profiles, r1.fit.profiles, atol=1e-7)
    np.testing.assert_allclose(r5.covariates.coef, r1.covariates.coef, atol=1e-6)
    np.testing.assert_allclose(r5.distal.params, r1.distal.params, atol=1e-6)


def _match(fit, sim) -> np.ndarray:
    """True class of each fitted class (by the item profiles; the design's classes are well apart)."""
    from vcmc.lca.simulate import _PROFILES

    p_item1 = fit.profiles[:, 1::2]          # P(item = 1) per class (binary items, modalities 0 and 1)
    cost = np.abs(p_item1[:, None, :] - _PROFILES[None, :, :]).sum(axis=2)
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


@pytest.mark.slow
def test_covariate_and_distal_effects_are_recovered():
    sim = simulate_lca((1000, 1000, 1000), rng=3)
    silos, cov, dis = _silos(sim.frames, **AUX)
    res = analyse(silos, 3, covariates=cov, distal=dis, n_starts=4, rng=5)
    truth = _match(res.fit, sim)
    assert len(set(truth)) == 3
    full = np.vstack([np.zeros(3), TRUE_BETA])            # log odds against true class 1
    expected = full[truth[1:]] - full[truth[0]]           # against the fitted reference class
    se = np.sqrt(np.diag(res.covariates.cov)).reshape(expected.shape)
    assert np.all(np.abs(res.covariates.coef - expected) < 3.5 * se)
    assert np.all(se < 0.25)
    table = res.distal.table()
    death = table[(table.outcome == "death") & (table.level == "1")].estimate.to_numpy()
    score = table[table.outcome == "score"].estimate.to_numpy()
    np.testing.assert_allclose(death, TRUE_DEATH[truth], atol=0.06)
    np.testing.assert_allclose(score, TRUE_SCORE[truth], atol=0.15)
    tests = res.distal.equality_tests()
    assert (tests.p_value < 1e-6).all()


def test_one_class_is_the_closed_form_and_statistics_are_stepmix_s(sim):
    silos, _, _ = _silos(sim.frames, exclude=["age", "sex", "death", "score"])
    tr = InProcessTransport(silos)
    fit = fit_lca(tr.call, list(tr.silos), silos[0].n_modalities, 1, rng=0)
    codes = np.vstack([s.codes for s in silos])
    expected = 0.0
    for q in range(codes.shape[1]):
        x = codes[:, q][codes[:, q] >= 0]
        freq = np.bincount(x) / x.size
        expected += np.sum(np.log(freq[x]))
    assert fit.loglik == pytest.approx(expected, rel=1e-10)
    n, p = 1100, n_parameters(1, silos[0].n_modalities)
    assert p == 8
    s = fit_statistics(-1000.0, 10, n, 50.0, 4)
    assert s["aic"] == 2020.0 and s["bic"] == pytest.approx(2000 + 10 * np.log(n))
    assert s["caic"] == pytest.approx(2000 + 10 * (np.log(n) + 1))
    assert s["sabic"] == pytest.approx(2000 + 10 * np.log((n + 2) / 24))
    assert s["relative_entropy"] == pytest.approx(1 - 50 / (n * np.log(4)))
    assert np.isnan(fit.statistics["relative_entropy"])


def test_compare_prefers_the_true_number_of_classes(sim):
    silos, _, _ = _silos(sim.frames, exclude=["age", "sex", "death", "score"])
    table, fits = compare(silos, [1, 2, 3, 4], n_starts=3, rng=2, waic_draws=30)
    assert list(table.columns) == ["k", "log_likelihood", "n_parameters", "aic", "bic", "sabic", "caic", "entropy",
                                   "relative_entropy", "waic", "smallest_class", "starts", "starts_at_best"]
    assert int(table.k[table.bic.idxmin()]) == 3
    assert table.log_likelihood.is_monotonic_increasing
    assert np.isfinite(table.waic).all()


def test_missing_covariates_are_refused_and_missing_outcomes_skipped(sim):
    frames = [df.copy() for df in sim.frames]
    frames[2].loc[5, "age"] = np.nan
    with pytest.raises(DataError, match="silo 'site2': covariate 'age' has 1 missing value.*StepMix"):
        _silos(frames, **AUX)
    silos, _, dis = _silos(sim.frames, **AUX)
    # distal outcomes with missing values (5% here): rows without the outcome contribute nothing
    res = analyse(silos, 3, distal=dis, n_starts=2, rng=0)
    assert res.distal.n_rows == 1100 and np.isfinite(res.distal.loglik)


def test_identifying_and_unknown_columns_are_refused(sim):
    frames = [df.copy() for df in sim.frames]
    for df in frames:
        df["patient"] = np.arange(len(df)) * 7 + 1
    with pytest.raises(DataError, match="column 'patient' has .* distinct values.*identify people"):
        _silos(frames, covariates="patient", exclude=["age", "sex", "death", "score"])
    with pytest.raises(DataError, match=r"silo 'site0': columns \['bmi'\] .*not in its file"):
        _silos(sim.frames, covariates="bmi")
