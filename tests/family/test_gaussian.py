"""The Gaussian family against exact references (docs/design.md §17.3): likelihood, statistics, the conjugate
posterior, the fractionated prior, the sampler's parameter step and the release rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from vcmc.config import PriorConfig
from vcmc.family import GAUSSIAN
from vcmc.family.gaussian import posterior_parameters, release_sums
from vcmc.mcmc.sampler.kernels_mixed import _draw_gaussian


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    x = rng.normal(0.3, 1.2, (80, 2))
    x[rng.random(x.shape) < 0.1] = np.nan
    return x, rng.integers(0, 3, 80)


def test_likelihood_and_statistics_are_the_direct_computation(data):
    x, labels = data
    params = np.array([[0.1, -0.2, 0.5, 2.0], [1.0, 0.0, 1.5, 0.3]])
    ll = GAUSSIAN.log_likelihood_rows(x, params, 2)
    ref = np.nansum(stats.norm.logpdf(x[:, None, :], params[None, :, :2], np.sqrt(params[None, :, 2:])), axis=2)
    assert np.allclose(ll, ref)
    st = GAUSSIAN.sufficient_statistics(x, labels, 3, 2)
    for c in range(3):
        xc = x[labels == c]
        assert np.allclose(st[c], np.concatenate([(~np.isnan(xc)).sum(0), np.nansum(xc, 0), np.nansum(xc ** 2, 0)]))


def test_posterior_draws_follow_the_exact_normal_inverse_gamma_posterior(data):
    x, labels = data
    st = GAUSSIAN.sufficient_statistics(x, labels, 3, 2)
    prior = GAUSSIAN.local_prior(PriorConfig(), 2, 1)
    draws = GAUSSIAN.posterior_draws(st, prior, 2, 20_000, np.random.default_rng(3))
    m_n, k_n, a_n, b_n = posterior_parameters(st, prior, 2)
    for c, g in ((0, 0), (2, 1)):
        var = draws[:, c, 2 + g]
        assert stats.kstest(var, stats.invgamma(a_n[c, g], scale=b_n[c, g]).cdf).pvalue > 1e-3
        t = stats.t(2 * a_n[c, g], loc=m_n[c, g], scale=np.sqrt(b_n[c, g] / (a_n[c, g] * k_n[c, g])))
        assert stats.kstest(draws[:, c, g], t.cdf).pvalue > 1e-3


def test_the_sampler_s_parameter_step_draws_the_same_conditional(data):
    x, labels = data
    st = GAUSSIAN.sufficient_statistics(x, labels, 3, 2)
    prior = GAUSSIAN.local_prior(PriorConfig(), 2, 4)
    prof = np.zeros((3, 5 + 4))
    gen = np.random.default_rng(5)
    out = np.empty((8000, 3, 4))
    for d in range(out.shape[0]):
        _draw_gaussian(st, prior, prof, 5, gen)
        out[d] = prof[:, 5:]
    m_n, k_n, a_n, b_n = posterior_parameters(st, prior, 2)
    assert stats.kstest(out[:, 1, 3], stats.invgamma(a_n[1, 1], scale=b_n[1, 1]).cdf).pvalue > 1e-3
    assert np.allclose(out[:, :, :2].mean(0), m_n, atol=0.03)


def test_fractionated_prior_to_the_power_s_is_the_prior_once():
    """In the coordinates (nu, eta) = ((mu - m0)/sigma, log sigma2), S times the log density of the local prior
    equals the log density of the prior plus a constant (docs/design.md §17.3)."""
    config, s = PriorConfig(), 7

    def log_density(p, nu, eta):
        m0, kappa, a, b = p
        sigma2 = np.exp(eta)
        mu = m0 + nu * np.sqrt(sigma2)
        jac = 0.5 * eta + eta                          # log |d(mu, sigma2) / d(nu, eta)|
        return stats.norm.logpdf(mu, m0, np.sqrt(sigma2 / kappa)) + stats.invgamma.logpdf(sigma2, a, scale=b) + jac

    nu, eta = np.meshgrid(np.linspace(-3, 3, 7), np.linspace(-4, 3, 9))
    diff = s * log_density(GAUSSIAN.local_prior(config, 1, s), nu, eta) \
        - log_density(GAUSSIAN.local_prior(config, 1, 1), nu, eta)
    assert np.ptp(diff) < 1e-9
    assert np.all(GAUSSIAN.local_prior(config, 1, 1000)[1:] > 0)             # proper for every S


def test_release_rounds_the_sums_and_noises_them_where_set():
    st = np.array([[10.0, 12.0, 3.14159, -2.71, 20.3, 9.87]])
    out = release_sums(st, 2, precision=0.5)
    assert np.array_equal(out[:, :2], st[:, :2])                                # counts are the count rules'
    assert np.allclose(out[:, 2:], [[3.0, -2.5, 20.5, 10.0]])
    noisy = [release_sums(st, 2, precision=0.0, noise_scale=1.0, rng=np.random.default_rng(i))[0, 2] for i in
             range(4000)]
    assert abs(np.mean(noisy) - 3.14159) < 0.1 and abs(np.var(noisy) - 2.0) < 0.2     # Laplace(1): variance 2
    assert np.array_equal(release_sums(st, 2, precision=0.0), st)
