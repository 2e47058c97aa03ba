"""The pooled chain's Gibbs block (vcmc.pooled.gibbs): conditional draws, alignment, the collapsed log joint."""

import numpy as np

from vcmc.model import beta_per_column
from vcmc.pooled.gibbs import align_to, draw_parameters, log_joint


def test_draws_follow_the_full_conditionals():
    rng = np.random.default_rng(0)
    n_mod = (2, 3)
    cluster = np.array([40.0, 0.0, 10.0])
    modality = np.array([[30, 10, 5, 5, 30], [0, 0, 0, 0, 0], [2, 8, 1, 1, 8]], dtype=float)
    beta = beta_per_column(0.5, n_mod)
    draws = [draw_parameters(cluster, modality, alpha=0.01, beta_cols=beta, n_modalities=n_mod, rng=rng)
             for _ in range(4000)]
    pi = np.exp([d[0] for d in draws])
    prof = np.exp([d[1] for d in draws])
    np.testing.assert_allclose(pi.mean(axis=0), (cluster + 0.01) / (cluster + 0.01).sum(), atol=0.01)
    want = (modality + 0.5) / np.concatenate([np.repeat((modality[:, :2] + 0.5).sum(1, keepdims=True), 2, 1),
                                              np.repeat((modality[:, 2:] + 0.5).sum(1, keepdims=True), 3, 1)], 1)
    np.testing.assert_allclose(prof.mean(axis=0), want, atol=0.02)
    assert np.all(np.isfinite([d[0] for d in draws]))        # the empty component's log weight stays finite


def test_alignment_undoes_a_permutation():
    rng = np.random.default_rng(1)
    ref = np.hstack([rng.dirichlet(np.ones(2), size=5), rng.dirichlet(np.ones(4), size=5)])
    perm = rng.permutation(5)
    shuffled = np.log(ref[perm])
    back = align_to(shuffled, ref)
    np.testing.assert_allclose(np.exp(shuffled[back]), ref)


def test_log_joint_equals_the_sequential_predictive_product():
    """log p(x, z) from counts against the product of Polya-urn predictive probabilities, row by row."""
    rng = np.random.default_rng(2)
    n_mod = (2, 3)
    alpha, beta, c = 0.3, 0.5, 3
    x = np.column_stack([rng.integers(0, 2, 25), rng.integers(0, 3, 25)])
    z = rng.integers(0, c, 25)
    off = [0, 2, 5]
    nc = np.zeros(c)
    ct = np.zeros((c, 5))
    seq = 0.0
    for i in range(25):
        seq += np.log((alpha + nc[z[i]]) / (c * alpha + nc.sum()))
        for q in range(2):
            block = ct[z[i], off[q]:off[q + 1]]
            seq += np.log((beta + block[x[i, q]]) / (beta * n_mod[q] + block.sum()))
        nc[z[i]] += 1
        for q in range(2):
            ct[z[i], off[q] + x[i, q]] += 1
    got = log_joint(nc, ct, alpha=alpha, beta_cols=beta_per_column(beta, n_mod), n_modalities=n_mod)
    np.testing.assert_allclose(got, seq, rtol=1e-10)

