"""The births' misfits (vcmc.rows.births): the rows a cluster explains worst, and the value that explains each
least, checked against a direct computation and on a hidden group."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vcmc.model import profile_offsets
from vcmc.rows.births import misfits


def _direct_scores(codes, n_mod, labels, profiles):
    """Row by row: the standardised log likelihood of each row under its own cluster's profile."""
    off = profile_offsets(n_mod)
    out = []
    for x, k in zip(codes, labels, strict=True):
        ll = mean = var = 0.0
        for q, v in enumerate(x):
            if v < 0:
                continue
            p = profiles[k, off[q]:off[q + 1]]
            ll += math.log(p[v])
            m = float(np.sum(p * np.log(p)))
            mean += m
            var += float(np.sum(p * np.log(p) ** 2)) - m * m
        out.append((ll - mean) / math.sqrt(var) if var > 0 else 0.0)
    return np.asarray(out)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.floats(0.01, 0.1))
def test_misfits_are_the_lowest_scores_and_their_least_probable_values(seed, share):
    rng = np.random.default_rng(seed)
    n_mod = (2, 3, 4, 2)
    n, k = 60, 3
    profiles = np.hstack([rng.dirichlet(np.ones(m), size=k) for m in n_mod])
    codes = np.stack([rng.integers(-1, m, n) for m in n_mod], axis=1)       # missing values included
    labels = rng.integers(0, k, n)
    rows, worst = misfits(codes, n_mod, labels, profiles, share)
    score = _direct_scores(codes, n_mod, labels, profiles)
    observed_rows = np.flatnonzero((codes >= 0).any(axis=1))
    assert rows.size == min(math.ceil(share * n), observed_rows.size)
    assert set(rows) <= set(observed_rows)
    # the chosen rows score no higher than any row left out
    rest = np.setdiff1d(observed_rows, rows)
    if rest.size:
        assert score[rows].max() <= score[rest].min() + 1e-9
    np.testing.assert_allclose(np.sort(score[rows]), np.sort(score[observed_rows])[:rows.size], atol=1e-9)
    off = profile_offsets(n_mod)
    for r, col in zip(rows, worst, strict=True):
        cells = [(profiles[labels[r], off[q] + v], off[q] + v) for q, v in enumerate(codes[r]) if v >= 0]
        assert col == min(cells)[1] or profiles[labels[r], col] == min(cells)[0]


def test_a_hidden_group_is_found_by_its_least_probable_value():
    """60 rows with a condition 1% of the large cluster has, among 6,000 of that cluster: among its 1% worst
    explained rows they are over ten times their 1% share (the others are the cluster's own rows with many
    conditions), and that condition is what explains most of them least: the largest count of a birth."""
    rng = np.random.default_rng(3)
    q = 12
    n_big, n_hidden = 6000, 60
    p_big = np.full(q, 0.1)
    p_big[-1] = 0.01
    p_hidden = p_big.copy()
    p_hidden[-1] = 0.9
    p_hidden[:3] = 0.6
    x = np.vstack([rng.random((n_big, q)) < p_big, rng.random((n_hidden, q)) < p_hidden]).astype(np.int64)
    labels = np.zeros(x.shape[0], dtype=np.int64)
    mean = x.mean(axis=0)                     # the cluster's profile, as the one-shot pass estimates it
    profiles = np.stack([1 - mean, mean], axis=1).reshape(1, -1)
    rows, worst = misfits(x, (2,) * q, labels, profiles, share=0.01)
    hidden = np.isin(rows, np.arange(n_big, n_big + n_hidden))
    assert hidden.mean() >= 10 * n_hidden / x.shape[0]
    hallmark = 2 * (q - 1) + 1                # the profile column of the rare condition's "yes"
    assert np.mean(worst[hidden] == hallmark) >= 0.9
    assert np.bincount(worst).argmax() == hallmark


def test_rows_without_an_observed_value_are_never_misfits():
    codes = np.array([[-1, -1], [0, 1], [1, 0], [-1, -1]])
    profiles = np.array([[0.5, 0.5, 0.9, 0.1]])
    rows, worst = misfits(codes, (2, 2), np.zeros(4, dtype=np.int64), profiles, share=1.0)
    assert sorted(rows.tolist()) == [1, 2]
    assert worst[rows.tolist().index(1)] == 3        # row 1: its second value (probability 0.1)
