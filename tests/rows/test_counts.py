"""Silo-side counts: soft counts against a direct scipy computation, hard counts against bincount."""

import numpy as np
import pytest
from scipy.special import logsumexp

from vcmc.exceptions import DataError
from vcmc.model import profile_offsets
from vcmc.rows.counts import hard_counts, soft_counts

N_MOD = (2, 3, 4)


def _random_problem(seed, n=150, m=5, c=3, missing=0.0):
    gen = np.random.default_rng(seed)
    k = np.asarray(N_MOD)
    codes = np.column_stack([gen.integers(0, kq, n) for kq in k])
    if missing:
        codes[gen.random(codes.shape) < missing] = -1
    pi = gen.dirichlet(np.ones(c), size=m)
    off = profile_offsets(N_MOD)
    prof = np.concatenate([gen.dirichlet(np.ones(kq), size=(m, c)) for kq in k], axis=2)
    assert prof.shape == (m, c, off[-1])
    return codes, pi, prof


def _direct(codes, pi, prof):
    """Responsibilities by an explicit (M, n, C) log-likelihood array and scipy's logsumexp."""
    off = profile_offsets(N_MOD)
    m, c = pi.shape
    n = codes.shape[0]
    logl = np.broadcast_to(np.log(pi)[:, None, :], (m, n, c)).copy()
    for q in range(codes.shape[1]):
        ok = codes[:, q] >= 0
        logl[:, ok, :] += np.log(prof[:, :, off[q] + codes[ok, q]]).transpose(0, 2, 1)
    lse = logsumexp(logl, axis=2)
    r = np.exp(logl - lse[:, :, None])
    cluster = r.sum(axis=1)
    modality = np.zeros_like(prof)
    for q in range(codes.shape[1]):
        for kq in range(N_MOD[q]):
            rows = codes[:, q] == kq
            modality[:, :, off[q] + kq] = r[:, rows, :].sum(axis=1)
    return cluster, modality, lse.sum(axis=1)


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_soft_counts_equal_direct_logsumexp_computation(missing):
    codes, pi, prof = _random_problem(1, missing=missing)
    got = soft_counts(codes, N_MOD, pi, prof)
    want = _direct(codes, pi, prof)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_soft_counts_sum_to_rows_and_skip_missing():
    codes, pi, prof = _random_problem(2, n=200, missing=0.3)
    cluster, modality, _ = soft_counts(codes, N_MOD, pi, prof)
    np.testing.assert_allclose(cluster.sum(axis=1), 200.0)
    off = profile_offsets(N_MOD)
    for q in range(len(N_MOD)):
        observed = np.sum(codes[:, q] >= 0)
        # each variable's modality counts add up to the rows where it is observed, not to n
        np.testing.assert_allclose(modality[:, :, off[q]:off[q + 1]].sum(axis=(1, 2)), observed)


def test_soft_counts_are_stable_for_many_variables():
    # 400 variables: the product of probabilities underflows in linear space, not in log space
    gen = np.random.default_rng(3)
    n_mod = (2,) * 400
    codes = gen.integers(0, 2, size=(20, 400))
    pi = np.array([[0.5, 0.5]])
    prof = np.tile(np.array([0.01, 0.99]), 400)[None, None, :].repeat(2, axis=1)
    prof[0, 1] = np.tile([0.5, 0.5], 400)
    cluster, _, loglik = soft_counts(codes, n_mod, pi, prof)
    assert np.all(np.isfinite(cluster)) and np.isfinite(loglik[0])
    np.testing.assert_allclose(cluster.sum(), 20.0)


def test_hard_counts_match_bincount_and_reject_bad_labels():
    codes, _, _ = _random_problem(4, n=60, missing=0.1)
    labels = np.random.default_rng(0).integers(-1, 3, 60)
    cluster, modality = hard_counts(codes, N_MOD, labels, 3)
    np.testing.assert_array_equal(cluster, np.bincount(labels[labels >= 0], minlength=3))
    off = profile_offsets(N_MOD)
    for c in range(3):
        for q in range(len(N_MOD)):
            for k in range(N_MOD[q]):
                assert modality[c, off[q] + k] == np.sum((labels == c) & (codes[:, q] == k))
    with pytest.raises(DataError, match="labels must lie"):
        hard_counts(codes, N_MOD, np.full(60, 5), 3)


def test_soft_counts_errors_name_the_problem_without_values():
    codes, pi, prof = _random_problem(5, n=10)
    bad = codes.copy()
    bad[3, 1] = 7
    with pytest.raises(DataError, match=r"codes: column 1 holds codes outside") as err:
        soft_counts(bad, N_MOD, pi, prof)
    assert "7" not in str(err.value)
    with pytest.raises(DataError, match="profiles"):
        soft_counts(codes, N_MOD, pi, prof[:, :, :-1])
