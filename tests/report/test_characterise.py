"""The characterisation rule and the scaled difference, at values worked out by hand."""

import numpy as np
import pytest

from vcmc.report.characterise import (
    MIN_EXPECTED,
    MIN_ODDS_RATIO,
    contrast_from_draws,
    contrast_from_estimates,
    present_modality,
    prior_pseudo_counts,
    shown_columns,
)
from vcmc.report.load import Columns, FitOutputs


def _binary_draws(pi, yes, n_draws=200):
    """Draws all equal to (pi, yes): pi (C,), yes (C, Q) -> profiles with columns no, yes per variable."""
    pi = np.asarray(pi, dtype=float)
    yes = np.asarray(yes, dtype=float)
    prof = np.empty((yes.shape[0], 2 * yes.shape[1]))
    prof[:, 0::2], prof[:, 1::2] = 1 - yes, yes
    return np.tile(pi, (n_draws, 1)), np.tile(prof, (n_draws, 1, 1))


def _cols(q):
    return Columns([f"c{i}" for i in range(q)], [["no", "yes"]] * q)


def test_odds_ratio_threshold_and_scaled_difference_at_known_values():
    # pi = (1/2, 1/2); variable 0: theta = (0.7, 0.1) -> pbar = 0.4, OR = (0.7/0.3)/(0.4/0.6) = 3.5 (high) and
    # (0.1/0.9)/(2/3) = 1/6 (low); variable 1: theta = (0.6, 0.2) -> pbar = 0.4, OR = 2.25 and 0.375: neither
    pi, prof = _binary_draws([0.5, 0.5], [[0.7, 0.6], [0.1, 0.2]])
    con = contrast_from_draws(pi, prof, shown_columns(_cols(2)), sizes=[1000, 1000])
    np.testing.assert_allclose(con.population_prevalence, [0.4, 0.4])
    np.testing.assert_allclose(con.odds_ratio, [[3.5, 2.25], [1 / 6, 0.375]])
    sd = np.sqrt(0.4 * 0.6)
    np.testing.assert_allclose(con.scaled, [[0.3 / sd, 0.2 / sd], [-0.3 / sd, -0.2 / sd]])
    np.testing.assert_array_equal(con.listed, [[1, 0], [-1, 0]])
    assert MIN_ODDS_RATIO == 3.0


def test_a_difference_is_listed_only_when_its_interval_excludes_no_difference():
    # cluster 0 has weight 0.01, so pbar ~ 0.2 (cluster 1's); its draws: 0.9 (OR ~ 34) with probability 1 - f,
    # 0.1 (below pbar) with probability f. Listed iff P(theta_0 > pbar) >= 0.975, i.e. f <= 0.025.
    n = 1000
    for f, expected in ((0.02, 1), (0.10, 0)):
        yes = np.full((n, 2, 1), 0.2)
        yes[:, 0, 0] = np.where(np.arange(n) < f * n, 0.1, 0.9)
        prof = np.concatenate([1 - yes, yes], axis=2)
        pi = np.tile([0.01, 0.99], (n, 1))
        con = contrast_from_draws(pi, prof, shown_columns(_cols(1)), sizes=[1000, 99000])
        assert con.listed[0, 0] == expected, f
        assert con.prob_higher[0, 0] == pytest.approx(1 - f)
        assert con.odds_ratio[0, 0] > 30        # the median alone would list it


def test_a_difference_resting_on_few_people_is_not_listed():
    # theta = 0.2 against pbar ~ 0.01 (OR ~ 25, certain): N theta - pseudo-counts >= 5 needs N theta >= 5 + 0.5
    pi, prof = _binary_draws([0.001, 0.999], [[0.2], [0.0098]])
    shown = shown_columns(_cols(1))
    for n, expected in ((25, 0), (28, 1)):            # 25 x 0.2 - 0.5 = 4.5; 28 x 0.2 - 0.5 = 5.1
        con = contrast_from_draws(pi, prof, shown, sizes=[n, 10_000], pseudo=np.full((2, 1), 0.5))
        assert con.listed[0, 0] == expected
        np.testing.assert_allclose(con.cases_net[0, 0], n * 0.2 - 0.5)
    assert MIN_EXPECTED == 5.0
    # low: expected cases at the population's prevalence, net of the prior, must reach 5
    pi, prof = _binary_draws([0.5, 0.5], [[0.001], [0.199]])        # pbar = 0.1, OR of cluster 0 ~ 0.009
    for n, expected in ((40, 0), (60, 1)):            # 40 x 0.1 = 4 < 5; 60 x 0.1 = 6
        con = contrast_from_draws(pi, prof, shown, sizes=[n, n])
        assert con.listed[0, 0] == -expected


def test_the_two_modalities_of_a_binary_variable_mirror_each_other(rng):
    pi = rng.dirichlet([5, 3, 2], size=300)
    yes = rng.beta(2, 5, size=(300, 3, 1))
    prof = np.concatenate([1 - yes, yes], axis=2)
    both = shown_columns(Columns(["a", "b"], [["no", "yes", "maybe"], ["x", "y", "z"]]))   # 3+: all shown
    assert both.index == [0, 1, 2, 3, 4, 5]
    from vcmc.report.characterise import Shown

    two = Shown([0, 1], ["a=no", "a=yes"], ["a", "a"], ["no", "yes"], [True, True])
    con = contrast_from_draws(pi, prof, two)
    np.testing.assert_allclose(con.scaled[:, 0], -con.scaled[:, 1])
    np.testing.assert_allclose(np.log(con.odds_ratio[:, 0]), -np.log(con.odds_ratio[:, 1]), atol=1e-9)


@pytest.mark.parametrize(("mods", "index"), [(("no", "yes"), 1), (("yes", "no"), 0), (("0", "1"), 1),
                                             (("True", "False"), 0), (("absent", "present"), 1),
                                             (("1", "2"), 1), (("low", "high"), 1)])
def test_present_modality(mods, index):
    assert present_modality(mods) == index


def test_shown_columns_name_binary_variables_by_their_present_modality():
    cols = Columns(["stroke", "V2", "smoking"], [["no", "yes"], ["1", "2"], ["never", "former", "current"]])
    shown = shown_columns(cols)
    assert shown.index == [1, 3, 4, 5, 6]
    assert shown.names == ["stroke", "V2=2", "smoking=never", "smoking=former", "smoking=current"]


def test_without_intervals_nothing_is_listed_and_with_them_the_cluster_interval_decides():
    shown = shown_columns(_cols(1))
    prof = np.array([[0.3, 0.7], [0.9, 0.1]])               # yes: 0.7 and 0.1; weights 1/2 -> pbar 0.4
    con = contrast_from_estimates([0.5, 0.5], prof, None, shown, sizes=[500, 500])
    assert con.source == "none" and not con.listed.any()
    ci = np.stack([prof - 0.05, prof + 0.05], axis=-1)
    con = contrast_from_estimates([0.5, 0.5], prof, ci, shown, sizes=[500, 500])
    np.testing.assert_array_equal(con.listed[:, 0], [1, -1])
    ci_wide = np.stack([np.full_like(prof, 0.01), np.full_like(prof, 0.99)], axis=-1)   # includes pbar
    con = contrast_from_estimates([0.5, 0.5], prof, ci_wide, shown, sizes=[500, 500])
    assert not con.listed.any()


def test_prior_pseudo_counts_follow_the_fractionated_prior_per_silo_holding_the_cluster():
    cols = _cols(2)
    clusters = [{"cluster": 1, "size": 30, "size_per_silo": {"a": 10, "b": 20, "c": 0, "d": 0, "e": 0}},
                {"cluster": 2, "size": 50, "size_per_silo": {"a": 50, "b": 0, "c": 0, "d": 0, "e": 0}}]
    result = {"clusters": clusters, "silos": list("abcde"), "method": "vcmc",
              "config": {"prior": {"beta": 0.5, "fractionate": True}}}
    fit = FitOutputs(folder=None, result=result, columns=cols, profiles=np.zeros((2, 4)), profiles_ci=None)
    shown = shown_columns(cols)
    beta_local = (0.5 - 1) / 5 + 1                                   # 0.9
    np.testing.assert_allclose(prior_pseudo_counts(fit, shown), [[2 * beta_local] * 2, [beta_local] * 2])
    result["config"]["prior"]["fractionate"] = False
    np.testing.assert_allclose(prior_pseudo_counts(fit, shown), [[1.0] * 2, [0.5] * 2])
    result["method"] = "full-mcmc"                                   # one pooled sampler: beta once
    np.testing.assert_allclose(prior_pseudo_counts(fit, shown), [[0.5] * 2, [0.5] * 2])
    result["config"] = {}                                            # no Dirichlet prior
    np.testing.assert_allclose(prior_pseudo_counts(fit, shown), 0.0)
