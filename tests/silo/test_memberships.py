"""Memberships of a silo's rows: exact on one draw, averaged over draws, zero where a cluster is absent."""

import numpy as np
import pytest

from vcmc.model import MISSING, log_likelihood_rows
from vcmc.silo.memberships import membership_summary, posterior_memberships


def _draws(rng, t, c, n_mod):
    pi = rng.dirichlet(np.ones(c), size=t)
    prof = np.concatenate([rng.dirichlet(np.ones(k), size=(t, c)) for k in n_mod], axis=2)
    return pi, prof


def test_one_draw_is_bayes_rule_and_many_draws_are_averaged():
    rng = np.random.default_rng(0)
    n_mod = (2, 3, 4)
    codes = np.stack([rng.integers(0, k, 50) for k in n_mod], axis=1)
    codes[rng.random(codes.shape) < 0.2] = MISSING
    pi, prof = _draws(rng, 7, 4, n_mod)
    one = posterior_memberships(codes, n_mod, pi[0], prof[0])
    lik = np.exp(log_likelihood_rows(codes, pi[0], prof[0], n_mod))
    np.testing.assert_allclose(one, lik / lik.sum(axis=1, keepdims=True), rtol=1e-12)
    many = posterior_memberships(codes, n_mod, pi, prof)
    each = [posterior_memberships(codes, n_mod, pi[t], prof[t]) for t in range(7)]
    np.testing.assert_allclose(many, np.mean(each, axis=0), rtol=1e-12)
    np.testing.assert_allclose(many.sum(axis=1), 1.0)


def test_a_cluster_absent_from_the_silo_gets_no_member():
    rng = np.random.default_rng(1)
    n_mod = (3,) * 5
    codes = np.stack([rng.integers(0, 3, 40) for _ in n_mod], axis=1)
    pi, prof = _draws(rng, 3, 3, n_mod)
    pi[:, 1] = 0.0
    pi /= pi.sum(axis=1, keepdims=True)
    m = posterior_memberships(codes, n_mod, pi, prof)
    assert np.all(m[:, 1] == 0.0) and np.allclose(m.sum(axis=1), 1.0)


def test_summary_is_cluster_level():
    m = np.array([[0.9, 0.1], [0.4, 0.6], [0.5, 0.5]])
    labels = np.array([0, 1, 0])
    s = membership_summary(m, labels)
    assert s["counts"].tolist() == [2, 1]
    np.testing.assert_allclose(s["expected"], [1.8, 1.2])
    np.testing.assert_allclose(s["probability"], [1.4, 0.6])
    ent = -np.sum(m * np.log(m))
    assert s["entropy"] == pytest.approx(ent)
