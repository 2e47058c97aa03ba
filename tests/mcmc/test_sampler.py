"""Correctness of the Gibbs sampler: exact conditional moments, allocation probabilities, log joint,
simulation-based calibration, recovery, reproducibility, missing values and input errors."""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import adjusted_rand_score

import vcmc.mcmc.sampler.kernels_dense as KD
import vcmc.mcmc.sampler.layout as LA
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError, DataError
from vcmc.mcmc.sampler import (
    conditional_draws,
    draw_dirichlet,
    kept_iterations,
    local_prior,
    log_joint,
    run_chain,
    sample_chains,
)
from vcmc.model import MISSING, log_likelihood_rows, one_hot_counts, profile_offsets

K_PAPER = [2, 2, 2, 2, 3, 3, 3, 3, 3, 3]


def simulate_lcm(n, n_modalities, weights, rng, *, sharp=0.85, missing=0.0):
    """Independent tiny generator: each cluster puts mass ``sharp`` on one modality per variable."""
    rng = np.random.default_rng(rng)
    weights = np.asarray(weights, float)
    n_clusters = weights.size
    labels = rng.choice(n_clusters, size=n, p=weights)
    codes = np.empty((n, len(n_modalities)), dtype=np.int64)
    profiles = []
    for q, k in enumerate(n_modalities):
        favourite = rng.permutation(np.resize(np.arange(k), n_clusters))
        p = np.full((n_clusters, k), (1 - sharp) / (k - 1))
        p[np.arange(n_clusters), favourite] = sharp
        profiles.append(p)
        cdf = np.cumsum(p[labels], axis=1)
        codes[:, q] = np.minimum((rng.random((n, 1)) > cdf).sum(axis=1), k - 1)
    if missing:
        codes[rng.random(codes.shape) < missing] = MISSING
    return codes, labels, profiles


def dirichlet_moments(a):
    a = np.asarray(a, float)
    a0 = a.sum(axis=-1, keepdims=True)
    mean = a / a0
    var = a * (a0 - a) / (a0**2 * (a0 + 1))
    return mean, var


def assert_moments(draws, mean, var, z_max=5.0):
    """Sample mean and variance against exact values, with standard errors estimated from the draws."""
    n = draws.shape[0]
    m_hat = draws.mean(axis=0)
    v_hat = draws.var(axis=0, ddof=1)
    se_m = np.sqrt(var / n)
    mu4 = ((draws - m_hat) ** 4).mean(axis=0)
    se_v = np.sqrt(np.maximum(mu4 - v_hat**2, 0) / n)
    ok_m = np.abs(m_hat - mean) <= z_max * se_m + 1e-12
    ok_v = np.abs(v_hat - var) <= z_max * se_v + 1e-12
    assert ok_m.all(), f"means off at {np.argwhere(~ok_m)[:5].tolist()}"
    assert ok_v.all(), f"variances off at {np.argwhere(~ok_v)[:5].tolist()}"


# ------------------------------------------------------------------------------------------ priors
def test_local_prior_fractionates_and_switches_off():
    k = [2, 3]
    a, b = local_prior(PriorConfig(n_components=4, alpha=0.01, beta=(0.5, 2.0)), k, n_silos=4)
    np.testing.assert_allclose(a, np.full(4, (0.01 - 1) / 4 + 1))
    np.testing.assert_allclose(b, [(0.5 - 1) / 4 + 1] * 2 + [(2.0 - 1) / 4 + 1] * 3)
    a, b = local_prior(PriorConfig(n_components=4, alpha=0.01, beta=0.5, fractionate=False), k, n_silos=4)
    np.testing.assert_allclose(a, 0.01)
    np.testing.assert_allclose(b, 0.5)
    with pytest.raises(ConfigError, match="one per variable"):
        local_prior(PriorConfig(beta=(0.5, 0.5, 0.5)), k, 2)


# --------------------------------------------------------------------------------------- Dirichlet
@pytest.mark.parametrize("alpha", [[1e-3] * 5, [0.01, 0.01, 3.0], [0.5, 2.0, 7.5, 0.3], [1e-3, 40.0]])
def test_draw_dirichlet_moments_including_sparse(alpha):
    draws = draw_dirichlet(alpha, rng=1, size=40_000)
    assert np.isfinite(draws).all()
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, rtol=1e-12)
    assert (draws.max(axis=1) > 0).all()
    mean, var = dirichlet_moments(alpha)
    assert_moments(draws, mean, var)


def test_draw_dirichlet_sparse_beats_naive_gamma_underflow():
    # naive normalised gammas give 0/0 for a large share of rows at alpha = 1e-3
    draws = draw_dirichlet([1e-3, 1e-3], rng=3, size=20_000)
    assert not np.isnan(draws).any()
    # by symmetry the first coordinate is near 0 or near 1 each half of the time
    assert abs((draws[:, 0] > 0.5).mean() - 0.5) < 0.02


@pytest.mark.parametrize(("a", "b"), [(0.875, 5.875), (0.3, 0.3), (1.0, 1.0), (40.0, 2.5), (0.05, 3.0)])
def test_dirichlet_marginals_follow_the_exact_beta_law(a, b):
    # the kernel's own Gamma generator (Marsaglia-Tsang, boosted below shape 1): a Dirichlet coordinate
    # is Beta(a_j, sum - a_j), checked against scipy's Beta CDF over the whole range, not only moments
    draws = draw_dirichlet([a, b], rng=17, size=20_000)
    assert stats.kstest(draws[:, 0], stats.beta(a, b).cdf).pvalue > 1e-3


def test_profile_conditionals_follow_the_exact_beta_law():
    # the flat per-component path of the parameter step (conditional_draws), with empty and filled cells
    rng = np.random.default_rng(4)
    k = [2, 3]
    codes = np.stack([rng.integers(0, kq, 30) for kq in k], axis=1)
    z = np.zeros(30, dtype=int)  # component 1 empty: its profiles are drawn from the prior
    alpha, beta = local_prior(PriorConfig(n_components=2, alpha=0.5, beta=0.5), k, n_silos=4)
    _, prof = conditional_draws(codes, k, z, alpha, beta, rng=5, n_draws=20_000)
    counts = one_hot_counts(codes, z, 2, k)
    for c in range(2):
        for j in (0, 2):  # first modality of each variable: Beta(beta_j + n_cj, rest of the block)
            block = slice(0, 2) if j == 0 else slice(2, 5)
            a_j = beta[j] + counts[c, j]
            b_j = (beta[block] + counts[c, block]).sum() - a_j
            assert stats.kstest(prof[:, c, j], stats.beta(a_j, b_j).cdf).pvalue > 1e-3


# ------------------------------------------------------------- conditional draws given allocations
@pytest.mark.parametrize("fractionate", [True, False])
def test_conditional_draws_match_dirichlet_moments(fractionate):
    rng = np.random.default_rng(7)
    k = [2, 3, 4]
    n, n_comp = 60, 5
    codes = np.stack([rng.integers(0, kq, n) for kq in k], axis=1)
    codes[rng.random(codes.shape) < 0.2] = MISSING
    z = rng.choice([0, 1, 3], size=n)  # components 2 and 4 empty
    prior = PriorConfig(n_components=n_comp, alpha=0.01, beta=(0.5, 1.5, 0.2), fractionate=fractionate)
    alpha, beta = local_prior(prior, k, n_silos=3)
    pi, prof = conditional_draws(codes, k, z, alpha, beta, rng=11, n_draws=30_000)
    assert np.isfinite(pi).all() and np.isfinite(prof).all()
    assert (pi.max(axis=1) > 0).all()
    # exact conditionals from an independent count: Dir(alpha + n_c), Dir(beta + n_{c, .})
    nc = np.bincount(z, minlength=n_comp)
    counts = one_hot_counts(codes, z, n_comp, k)
    mean, var = dirichlet_moments(alpha + nc)
    assert_moments(pi, mean, var)
    off = profile_offsets(k)
    for q in range(len(k)):
        sl = slice(off[q], off[q + 1])
        mean, var = dirichlet_moments(beta[None, sl] + counts[:, sl])
        assert_moments(prof[:, :, sl], mean, var)
        np.testing.assert_allclose(prof[:, :, sl].sum(axis=2), 1.0, rtol=1e-12)


# --------------------------------------------------------------- allocation step (float32 tables)
def _exact_allocation(codes, k, pi, prof):
    ll = log_likelihood_rows(codes, pi, prof, k)
    return np.exp(ll - np.logaddexp.reduce(ll, axis=1, keepdims=True))


@pytest.mark.parametrize(("k", "n_comp", "sharp"), [(K_PAPER, 15, 0.5), ([2] * 80, 30, 0.5),
                                                    ([3] * 200, 7, 1e-3)])
def test_allocation_probabilities_match_exact_log_space(k, n_comp, sharp):
    rng = np.random.default_rng(5)
    n = 300
    codes = np.stack([rng.integers(0, kq, n) for kq in k], axis=1)
    codes[rng.random(codes.shape) < 0.1] = MISSING
    pi = draw_dirichlet(np.full(n_comp, 0.3), rng=rng)
    prof = np.concatenate([draw_dirichlet(np.full(kq, sharp), rng=rng, size=n_comp) for kq in k], axis=1)
    prof = np.maximum(prof, 1e-300)
    prof /= np.add.reduceat(prof, profile_offsets(k)[:-1], axis=1).repeat(k, axis=1)
    x = LA._check_codes(codes, np.asarray(k))
    lay = LA._layout(x, np.asarray(k), profile_offsets(k))
    out = np.empty((lay.gcode.shape[0], n_comp))
    KD._allocation_probabilities(lay.gcode, lay.pidx, lay.grp_var, lay.grp_off, lay.radix, lay.kmod,
                                profile_offsets(k), lay.check, pi, np.log(pi), prof, out)
    expected = _exact_allocation(codes, k, pi, prof)[lay.row_of[lay.pat_start[:-1]]]
    np.testing.assert_allclose(out, expected, atol=2e-6, rtol=1e-4)


# ----------------------------------------------------------------------------- chain bookkeeping
def test_chain_bookkeeping_log_joint_and_occupancy():
    codes, _, _ = simulate_lcm(120, [2, 3, 3], [0.5, 0.3, 0.2], rng=2, missing=0.1)
    k = [2, 3, 3]
    prior = PriorConfig(n_components=6, alpha=0.5, beta=0.5)
    sampler = SamplerConfig(n_iter=232, burn_in=50, thin=7, block_size=40)
    alpha, beta = local_prior(prior, k, n_silos=2)
    blocks, steps = [], []
    draws = run_chain(codes, k, prior=prior, sampler=sampler, n_silos=2, rng=4, on_block=blocks.append,
                      progress=steps.append)
    assert sum(steps) == sampler.n_iter
    assert draws.pi.shape == (sampler.n_kept, 6) == (kept_iterations(sampler).size, 6)
    assert draws.profiles.shape == (sampler.n_kept, 6, 8)
    starts = [b.start for b in blocks]
    sizes = [b.size for b in blocks]
    assert starts == list(np.cumsum([0, *sizes[:-1]])) and sum(sizes) == sampler.n_kept
    for b in blocks:
        assert b.z.dtype == np.int16 and b.z.shape == (b.size, 120)
        np.testing.assert_array_equal(b.pi, draws.pi[b.start:b.start + b.size])
        for t in range(b.size):
            assert b.n_occupied[t] == np.unique(b.z[t]).size
            expected = log_joint(codes, k, b.z[t], b.pi[t], b.profiles[t], alpha, beta)
            assert b.log_posterior[t] == pytest.approx(expected, rel=1e-10)
    np.testing.assert_array_equal(blocks[-1].z[-1], draws.final_z)  # last iteration is kept here


def test_same_seed_same_draws_block_size_irrelevant_and_seed_matters():
    codes, _, _ = simulate_lcm(200, K_PAPER, [0.6, 0.4], rng=8)
    prior = PriorConfig(n_components=5)
    a = run_chain(codes, K_PAPER, prior=prior, sampler=SamplerConfig(n_iter=300, burn_in=100, thin=5,
                                                                     block_size=1000), rng=9)
    b = run_chain(codes, K_PAPER, prior=prior, sampler=SamplerConfig(n_iter=300, burn_in=100, thin=5,
                                                                     block_size=7), rng=9)
    c = run_chain(codes, K_PAPER, prior=prior, sampler=SamplerConfig(n_iter=300, burn_in=100, thin=5), rng=10)
    for field in ("pi", "profiles", "n_occupied", "log_posterior", "final_z"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.pi, c.pi)



def test_draws_stored_in_the_callers_arrays_are_the_same_draws():
    codes, _, _ = simulate_lcm(120, K_PAPER, [0.6, 0.4], rng=8)
    prior = PriorConfig(n_components=5)
    sampler = SamplerConfig(n_iter=200, burn_in=100, thin=5, block_size=30)
    own = run_chain(codes, K_PAPER, prior=prior, sampler=sampler, rng=9)
    storage = (np.empty((sampler.n_kept, 5)), np.empty((sampler.n_kept, 5, int(sum(K_PAPER)))))
    given = run_chain(codes, K_PAPER, prior=prior, sampler=sampler, rng=9, draw_storage=storage)
    assert np.shares_memory(given.profiles, storage[1])
    np.testing.assert_array_equal(own.profiles, given.profiles)
    np.testing.assert_array_equal(own.pi, given.pi)
    with pytest.raises(ConfigError, match="draw_storage"):
        run_chain(codes, K_PAPER, prior=prior, sampler=sampler, rng=9, draw_storage=(storage[0], storage[0]))

def test_sample_chains_independent_of_jobs():
    codes, _, _ = simulate_lcm(150, [2, 2, 3], [0.5, 0.5], rng=1)
    cfg = dict(prior=PriorConfig(n_components=4), sampler=SamplerConfig(n_iter=200, burn_in=50, n_chains=3))
    serial = sample_chains(codes, [2, 2, 3], rng=21, jobs=1, **cfg)
    pooled = sample_chains(codes, [2, 2, 3], rng=21, jobs=2, **cfg)
    assert len(serial) == 3
    for s, p in zip(serial, pooled, strict=True):
        np.testing.assert_array_equal(s.profiles, p.profiles)
        np.testing.assert_array_equal(s.log_posterior, p.log_posterior)
    assert not np.array_equal(serial[0].pi, serial[1].pi)


# ---------------------------------------------------------------------------------- missing values
def test_missing_values_are_skipped():
    k = [2, 3, 3, 2, 2, 3, 2]
    codes, labels, _ = simulate_lcm(400, k, [0.5, 0.5], rng=12, sharp=0.9, missing=0.2)
    codes[:, 3] = MISSING  # a variable never observed: its profiles must stay at the prior
    beta = (0.5, 0.5, 0.5, 2.0, 0.5, 0.5, 0.5)
    prior = PriorConfig(n_components=4, alpha=0.01, beta=beta, fractionate=False)
    sampler = SamplerConfig(n_iter=1500, burn_in=500, thin=2)
    draws = run_chain(codes, k, prior=prior, sampler=sampler, rng=13)
    assert np.isfinite(draws.log_posterior).all() and np.isfinite(draws.profiles).all()
    # prior Dir(2, 2) of the unobserved variable: mean 1/2, variance 1/20
    p_unobserved = draws.profiles[:, :, 8].ravel()
    assert abs(p_unobserved.mean() - 0.5) < 0.03
    assert abs(p_unobserved.var() - 0.05) < 0.01
    # the observed part still separates the two clusters
    assert adjusted_rand_score(labels, draws.final_z) > 0.8


# ------------------------------------------------------------------------------- input validation
def test_bad_inputs_raise_typed_errors_without_values():
    k = [2, 3]
    prior, sampler = PriorConfig(n_components=3), SamplerConfig(n_iter=10, burn_in=0)
    codes = np.array([[0, 1], [1, 2], [0, 0]])
    bad = codes.copy()
    bad[1, 1] = 7
    with pytest.raises(DataError, match=r"codes: column 1 holds codes outside") as err:
        run_chain(bad, k, prior=prior, sampler=sampler)
    assert "7" not in str(err.value)
    with pytest.raises(DataError, match="2 columns"):
        run_chain(codes, [2, 3, 2], prior=prior, sampler=sampler)
    with pytest.raises(DataError, match="integer codes"):
        run_chain(codes.astype(float), k, prior=prior, sampler=sampler)
    with pytest.raises(ConfigError, match="n_silos"):
        run_chain(codes, k, prior=prior, sampler=sampler, n_silos=0)
    with pytest.raises(ConfigError, match="alpha"):
        draw_dirichlet([0.0, 1.0])


# ----------------------------------------------------------------------------------------- recovery
def test_recovers_number_of_clusters_on_separated_data():
    codes, labels, _ = simulate_lcm(800, K_PAPER, [0.4, 0.35, 0.25], rng=3, sharp=0.9)
    prior = PriorConfig(n_components=15, alpha=0.01, fractionate=False)
    # A Gibbs chain sometimes splits a true cluster in two for a few thousand iterations before merging
    # (slow mixing of the over-fitted model, not a bias): the long burn-in and the tolerances below hold
    # for every one of 32 seeds tried, including the few chains that were still merging a split.
    sampler = SamplerConfig(n_iter=6000, burn_in=3000, thin=5)
    top3, big = [], []

    def sizes(block):
        for t in range(block.size):
            size = np.bincount(block.z[t], minlength=15)
            top3.append(np.sort(size)[-3:].sum() / block.z.shape[1])
            big.append(int((size >= 0.01 * block.z.shape[1]).sum()))

    draws = run_chain(codes, K_PAPER, prior=prior, sampler=sampler, rng=5, on_block=sizes)
    counts = np.bincount(draws.n_occupied)
    # posterior mode of the number of occupied components = truth; extra components (alpha = 0.01) hold
    # only a few atypical rows (with 10 variables at 90% agreement a few rows fit no cluster well)
    assert counts.argmax() == 3
    assert counts[3] / counts.sum() > 0.4
    assert np.mean(np.array(big) == 3) > 0.75  # components with >= 1% of the rows: the 3 true clusters
    assert np.mean(np.array(top3) >= 0.98) > 0.75
    assert adjusted_rand_score(labels, draws.final_z) > 0.9


# ----------------------------------------------------------------------- simulation-based calibration
def _prior_draw(rng, n_comp, k, alpha, beta):
    pi = rng.dirichlet(np.full(n_comp, alpha))
    prof = np.concatenate([rng.dirichlet(np.full(kq, beta), size=n_comp) for kq in k], axis=1)
    return pi, prof


def _invariants(pi, prof, k):
    """Label-invariant functionals: max weight and marginal P(X^q = 0) for each variable."""
    off = profile_offsets(k)
    marg = [(pi * prof[..., off[q]]).sum(axis=-1) for q in range(len(k))]
    return np.stack([pi.max(axis=-1), *marg], axis=-1)


def test_simulation_based_calibration():
    k, n_comp, n, alpha, beta = [2, 2], 2, 20, 1.0, 1.0
    prior = PriorConfig(n_components=n_comp, alpha=alpha, beta=beta, fractionate=False)
    n_keep = 19
    sampler = SamplerConfig(n_iter=100 + 10 * n_keep, burn_in=100, thin=10)
    rng = np.random.default_rng(2024)
    n_rep = 400
    ranks = np.empty((n_rep, 1 + len(k)), dtype=int)
    for r in range(n_rep):
        pi, prof = _prior_draw(rng, n_comp, k, alpha, beta)
        z = rng.choice(n_comp, size=n, p=pi)
        off = profile_offsets(k)
        codes = np.stack([(rng.random(n) > prof[z, off[q]]).astype(int) for q in range(len(k))], axis=1)
        draws = run_chain(codes, k, prior=prior, sampler=sampler, rng=rng.integers(2**32))
        truth = _invariants(pi, prof, k)
        post = _invariants(draws.pi, draws.profiles, k)
        ranks[r] = (post < truth).sum(axis=0)
    # ranks uniform on 0..19: chi-square over 10 bins of two ranks each
    for j in range(ranks.shape[1]):
        observed = np.bincount(ranks[:, j] // 2, minlength=10)
        p = stats.chisquare(observed).pvalue
        assert p > 1e-3, f"functional {j}: ranks not uniform (p = {p:.2g}, bins {observed.tolist()})"


def test_kept_iterations_match_config():
    s = SamplerConfig(n_iter=50_000, burn_in=25_000, thin=5)
    it = kept_iterations(s)
    assert it[0] == 25_004 and it[-1] == 49_999 and it.size == s.n_kept == 5000
    assert math.isclose(np.diff(it).mean(), 5)
