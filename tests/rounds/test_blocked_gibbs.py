"""The server's block of the pooled Gibbs sampler: conditional draws, alignment, the collapsed log joint."""

import numpy as np

from vcmc.model import beta_per_column
from vcmc.rounds.blocked_gibbs import align_to, draw_parameters, log_joint, merge_gains, merge_greedily


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


def _counts(z, x, n_mod, c):
    off = np.concatenate([[0], np.cumsum(n_mod)])
    ct = np.zeros((c, off[-1]))
    for q in range(len(n_mod)):
        np.add.at(ct, (z, off[q] + x[:, q]), 1.0)
    return np.bincount(z, minlength=c).astype(float), ct


def test_merge_gains_are_the_change_of_the_log_joint():
    rng = np.random.default_rng(3)
    n_mod = (2, 4, 3)
    beta = beta_per_column(0.5, n_mod)
    x = np.column_stack([rng.integers(0, m, 60) for m in n_mod])
    z = rng.integers(0, 4, 60)
    z[z == 3] = 2                                   # component 3 empty
    cluster, modality = _counts(z, x, n_mod, 5)
    gains = merge_gains(cluster, modality, alpha=0.01, beta_cols=beta, n_modalities=n_mod)
    now = log_joint(cluster, modality, alpha=0.01, beta_cols=beta, n_modalities=n_mod)
    for a in range(5):
        for b in range(5):
            if a == b or cluster[a] == 0 or cluster[b] == 0:
                assert gains[a, b] == -np.inf
                continue
            zm = np.where(z == b, a, z)
            after = log_joint(*_counts(zm, x, n_mod, 5), alpha=0.01, beta_cols=beta, n_modalities=n_mod)
            np.testing.assert_allclose(gains[a, b], after - now, rtol=1e-10, atol=1e-8)


def test_greedy_merges_join_copies_of_one_cluster_and_keep_distinct_clusters_apart():
    # two clusters with opposite profiles, each split at random into three copies (the over-complete start
    # of three silos): the merges give back exactly the two clusters, and every merge raised the log joint
    rng = np.random.default_rng(4)
    n_mod = (2,) * 12
    beta = beta_per_column(0.5, n_mod)
    truth = np.repeat([0, 1], 150)
    p = np.where(truth[:, None] == 0, 0.85, 0.15)
    x = (rng.random((300, 12)) < p).astype(int)
    z = truth * 3 + rng.integers(0, 3, 300)
    cluster, modality = _counts(z, x, n_mod, 6)
    merged_n, merged_ct, n_merged = merge_greedily(cluster, modality, alpha=0.01, beta_cols=beta, n_modalities=n_mod)
    assert n_merged == 4
    np.testing.assert_array_equal(np.sort(merged_n[merged_n > 0]), [150, 150])
    assert merged_n[0] == 150 and merged_n[3] == 150
    assert (log_joint(merged_n, merged_ct, alpha=0.01, beta_cols=beta, n_modalities=n_mod)
            > log_joint(cluster, modality, alpha=0.01, beta_cols=beta, n_modalities=n_mod))
