"""The global-informed rounds with Gaussian items (docs/design.md §17.8): the fixed-point grid's sums add exactly,
the pooled chain's Gaussian draw given the pooled sums is the single-machine conjugate draw, its collapsed log
joint's Gaussian term is the marginal likelihood, and values beyond the grid or pooled sums that could have wrapped
are refused."""

import math

import numpy as np
import pytest
from scipy import stats

from vcmc.exceptions import DataError
from vcmc.family import GAUSSIAN
from vcmc.family.gaussian import GRID_BITS, MAX_POOLED_ROWS, from_grid, grid_values, posterior_parameters
from vcmc.mcmc.sampler.round_kernels import gaussian_counts
from vcmc.model import beta_per_column
from vcmc.pooled.chain import ChainPlan, PooledChain, Seeds
from vcmc.pooled.gibbs import draw_gaussian, draw_parameters, log_joint
from vcmc.protocol.rounds import pack, unpack

N_MOD = (2, 3)
PRIOR = np.array([0.0, 0.01, 2.5, 0.75])
C, G = 3, 2


def _silos(rng, sizes=(40, 55, 70)):
    """Per silo: codes, standardised values (5% missing), an allocation."""
    out = []
    for n in sizes:
        codes = np.stack([rng.integers(0, k, n) for k in N_MOD], axis=1)
        x = rng.normal([-1.0, 2.0], [0.7, 1.3], size=(n, G))
        x[rng.random((n, G)) < 0.05] = np.nan
        out.append((codes, x, rng.integers(0, C, n)))
    return out


def _silo_vector(codes, x, z):
    """What a silo packs: its counts and its Gaussian statistics on the grid (as vcmc.rows.rounds does)."""
    off = np.cumsum([0, *N_MOD])
    ct = np.zeros((C, off[-1]))
    for q in range(len(N_MOD)):
        np.add.at(ct, (z, off[q] + codes[:, q]), 1.0)
    m, seen = grid_values(x)
    return pack([(np.bincount(z, minlength=C).astype(float), ct, gaussian_counts(z, m, seen, C))])


def test_the_pooled_gaussian_draw_is_the_single_machine_conjugate_draw():
    rng = np.random.default_rng(4)
    silos = _silos(rng)
    total = np.zeros_like(_silo_vector(*silos[0]))
    for s in silos:     # the secure sum's arithmetic: modulo 2^64
        total = (total.view(np.uint64) + _silo_vector(*s).view(np.uint64)).view(np.int64)
    ((cluster, modality, on_the_grid),) = unpack(total, 1, C, G)
    gauss = from_grid(on_the_grid)
    # the single machine: every row on the grid's values, the family's statistics and draw
    x = np.vstack([s[1] for s in silos])
    z = np.concatenate([s[2] for s in silos])
    m, seen = grid_values(x)
    on_grid = np.where(seen, m * 2.0**-GRID_BITS, np.nan)
    single = GAUSSIAN.sufficient_statistics(on_grid, z, C, G)
    np.testing.assert_array_equal(gauss, single)                    # the grid's sums add exactly
    assert np.max(np.abs(on_grid - x)[seen]) <= 2.0**-(GRID_BITS + 1)
    a = draw_gaussian(gauss, PRIOR, G, np.random.default_rng(9))
    b = GAUSSIAN.posterior_draws(single, PRIOR, G, 1, np.random.default_rng(9))[0]
    np.testing.assert_array_equal(a, b)
    # and the pooled chain's draw: the weights and profiles, then the Gaussian items on the same stream
    plan = ChainPlan(n_components=C, alpha=0.01, beta_cols=tuple(beta_per_column(0.5, N_MOD)), n_modalities=N_MOD,
                     checkpoints=(40,), stop=False, n_gaussian=G, gaussian_prior=tuple(PRIOR))
    seeds = Seeds(17)
    (draw,) = PooledChain(plan, seeds).advance([(cluster, modality, gauss)])
    rng2 = seeds.parameters(2, 0)
    log_pi, log_prof = draw_parameters(cluster, modality, alpha=0.01, beta_cols=plan.beta(), n_modalities=N_MOD,
                                       rng=rng2)
    np.testing.assert_array_equal(draw.log_pi, log_pi)
    np.testing.assert_array_equal(draw.gaussian, GAUSSIAN.posterior_draws(single, PRIOR, G, 1, rng2)[0])


def test_the_categorical_chain_is_unchanged_by_the_gaussian_code():
    """Without Gaussian items a draw is the weights and profiles alone, from the same stream as before."""
    cluster, modality = np.array([10.0, 5.0, 0.0]), np.array([[6, 4, 3, 3, 4], [1, 4, 2, 2, 1], [0, 0, 0, 0, 0.0]])
    plan = ChainPlan(n_components=C, alpha=0.01, beta_cols=tuple(beta_per_column(0.5, N_MOD)), n_modalities=N_MOD,
                     checkpoints=(40,), stop=False)
    (draw,) = PooledChain(plan, Seeds(3)).advance([(cluster, modality)])
    log_pi, log_prof = draw_parameters(cluster, modality, alpha=0.01, beta_cols=plan.beta(), n_modalities=N_MOD,
                                       rng=Seeds(3).parameters(2, 0))
    assert draw.gaussian is None
    np.testing.assert_array_equal(draw.log_profiles, log_prof)
    with pytest.raises(ValueError, match="Gaussian"):
        PooledChain(plan, Seeds(3)).advance([(cluster, modality, np.zeros((C, 3 * G)))])


def test_the_log_joint_s_gaussian_term_is_the_marginal_likelihood():
    """The family's marginal likelihood equals the product of the sequential Student-t predictives."""
    rng = np.random.default_rng(2)
    y = rng.normal(0.4, 0.8, 12)
    seq = 0.0
    for i, v in enumerate(y):
        seen = y[:i]
        st = np.array([[seen.size, seen.sum(), (seen**2).sum()]])
        m_n, k_n, a_n, b_n = (float(t[0, 0]) for t in posterior_parameters(st, PRIOR, 1))
        seq += stats.t.logpdf(v, 2 * a_n, loc=m_n, scale=math.sqrt(b_n * (k_n + 1) / (a_n * k_n)))
    st = np.array([[y.size, y.sum(), (y**2).sum()], [0.0, 0.0, 0.0]])
    assert GAUSSIAN.log_marginal_likelihood(st, PRIOR, 1) == pytest.approx(seq, rel=1e-10)
    cluster, modality = np.array([12.0, 0.0]), np.zeros((2, 2))
    base = log_joint(cluster, modality, alpha=0.5, beta_cols=np.ones(2), n_modalities=(2,))
    assert log_joint(cluster, modality, alpha=0.5, beta_cols=np.ones(2), n_modalities=(2,), gaussian=st,
                     gaussian_prior=PRIOR) == pytest.approx(base + seq, rel=1e-10)


def test_values_beyond_the_grid_and_sums_that_could_have_wrapped_are_refused():
    x = np.array([[0.5, 1.0], [np.nan, -64.0], [3.0, 64.5]])
    with pytest.raises(DataError, match=r"\['X2'\].*fixed-point grid"):
        grid_values(x, ["X1", "X2"])
    m, seen = grid_values(x[:2])
    assert m[1, 1] == -64 * 2**GRID_BITS and not seen[1, 0] and m[1, 0] == 0
    vector = pack([(np.ones(C), np.ones((C, 5)), np.zeros((C, 3 * G), dtype=np.int64))])
    vector[C + 5 * C] = MAX_POOLED_ROWS              # component 0's rows observing item 1
    with pytest.raises(ValueError, match="fewer than"):
        from_grid(unpack(vector, 1, C, G)[0][2])


def test_the_chain_with_gaussian_items_survives_export_as_a_silo_s_state_between_messages():
    """A Flower silo restores the chain from its state at every message: the same draws, stored Gaussian draws and
    observed rows as a chain kept in memory."""
    rng = np.random.default_rng(6)
    silos = _silos(rng)
    codes = np.vstack([s[0] for s in silos])
    x = np.vstack([s[1] for s in silos])
    m, seen = grid_values(x)
    on_grid = np.where(seen, m * 2.0**-GRID_BITS, np.nan)
    off = np.cumsum([0, *N_MOD])

    def counts(z):
        ct = np.zeros((C, off[-1]))
        for q in range(len(N_MOD)):
            np.add.at(ct, (z, off[q] + codes[:, q]), 1.0)
        return np.bincount(z, minlength=C).astype(float), ct, GAUSSIAN.sufficient_statistics(on_grid, z, C, G)

    def allocate(draw):
        ll = np.tile(draw.log_pi, (z.size, 1))
        for q in range(len(N_MOD)):
            ll += draw.log_profiles[:, off[q] + codes[:, q]].T
        ll += GAUSSIAN.log_likelihood_rows(on_grid, draw.gaussian, G)
        p = np.exp(ll - ll.max(axis=1, keepdims=True))
        return np.array([rng.choice(C, p=row / row.sum()) for row in p])

    plan = ChainPlan(n_components=C, alpha=0.01, beta_cols=tuple(beta_per_column(0.5, N_MOD)), n_modalities=N_MOD,
                     checkpoints=(12,), stop=False, max_stored=500, min_size=5, n_gaussian=G,
                     gaussian_prior=tuple(PRIOR))
    z = np.concatenate([s[2] for s in silos])
    a, b = PooledChain(plan, Seeds(5)), PooledChain(plan, Seeds(5))
    da, db = a.advance([counts(z)]), b.advance([counts(z)])
    while da is not None:
        z = allocate(da[0])
        da = a.advance([counts(z)])
        b = PooledChain.restore(plan, Seeds(5), b.export())
        db = b.advance([counts(z)])
        assert (da is None) == (db is None)
        if da is not None:
            np.testing.assert_array_equal(da[0].gaussian, db[0].gaussian)
    np.testing.assert_array_equal(a.gaussian_draws(), b.gaussian_draws())
    np.testing.assert_array_equal(a.observed_rows(), b.observed_rows())
    assert a.gaussian_draws().shape == (6, a.clusters().size, 2 * G)
    assert a.trace_lj[0] == b.trace_lj[0]
