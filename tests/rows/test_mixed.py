"""A silo's row computations with Gaussian items (docs/design.md §17.7) against direct references."""

from __future__ import annotations

import numpy as np
from scipy import stats

from vcmc.rows.mixed import item_moments, memberships, replicate_item_moments, waic_sums


def _data(rng):
    codes = rng.integers(-1, 2, (40, 2)).astype(np.int16)
    values = rng.normal(0, 1, (40, 2))
    values[rng.random(values.shape) < 0.2] = np.nan
    pi = rng.dirichlet(np.ones(3), size=5)
    prof = np.concatenate([rng.dirichlet(np.ones(2), size=(5, 3)), rng.dirichlet(np.ones(2), size=(5, 3))], axis=2)
    gauss = np.concatenate([rng.normal(0, 1, (5, 3, 2)), rng.uniform(0.5, 2, (5, 3, 2))], axis=2)
    return codes, values, pi, prof, gauss


def _direct(codes, values, pi, prof, gauss):
    out = np.tile(np.log(pi), (codes.shape[0], 1))
    for i in range(codes.shape[0]):
        for c in range(pi.size):
            for q in range(2):
                if codes[i, q] >= 0:
                    out[i, c] += np.log(prof[c, 2 * q + codes[i, q]])
            for g in range(2):
                if not np.isnan(values[i, g]):
                    out[i, c] += stats.norm.logpdf(values[i, g], gauss[c, g], np.sqrt(gauss[c, 2 + g]))
    return out


def test_memberships_and_waic_are_the_direct_computation():
    rng = np.random.default_rng(1)
    codes, values, pi, prof, gauss = _data(rng)
    joint = np.stack([_direct(codes, values, pi[t], prof[t], gauss[t]) for t in range(5)])
    w = np.exp(joint - joint.max(axis=2, keepdims=True))
    expected = (w / w.sum(axis=2, keepdims=True)).mean(axis=0)
    assert np.allclose(memberships(codes, (2, 2), values, pi, prof, gauss), expected)
    ll = np.log(np.exp(joint).sum(axis=2))                              # (T, n)
    lppd = np.log(np.exp(ll).mean(axis=0))
    sums = waic_sums(codes, (2, 2), values, pi, prof, gauss)
    assert np.isclose(sums["lppd"], lppd.sum()) and np.isclose(sums["p_waic"], ll.var(axis=0).sum())


def test_replicated_moments_from_sufficient_statistics_are_those_of_replicated_rows():
    rng = np.random.default_rng(2)
    values = rng.normal(0, 1, (60, 2))
    values[:10, 1] = np.nan
    pi = np.array([0.5, 0.3, 0.2])
    gauss = np.array([[-1.0, 0.0, 0.5, 1.0], [0.5, 1.0, 0.3, 0.6], [2.0, -1.0, 1.2, 0.4]])
    fast = np.stack([replicate_item_moments(values, pi, gauss, rng) for _ in range(6000)])
    slow = np.empty_like(fast)
    for r in range(fast.shape[0]):
        for g, n in enumerate((60, 50)):
            z = rng.choice(3, size=n, p=pi)
            y = rng.normal(gauss[z, g], np.sqrt(gauss[z, 2 + g]))
            slow[r, :, g] = y.mean(), y.var()
    assert np.allclose(fast.mean(axis=0), slow.mean(axis=0), atol=0.03)
    assert np.allclose(fast.std(axis=0), slow.std(axis=0), rtol=0.08)
    assert item_moments(values).shape == (2, 2)
