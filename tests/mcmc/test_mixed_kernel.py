"""The mixed kernel's allocation probabilities (vectorised Gaussian factor, sparse categorical product, exact
fallback) against the families' plain numpy log-likelihoods."""

from __future__ import annotations

import numpy as np
import pytest

from vcmc.family import CATEGORICAL, GAUSSIAN
from vcmc.mcmc.sampler.kernels_mixed import _allocation_probabilities_mixed, mixed_rows
from vcmc.mcmc.sampler.layout import _table_index, row_layout
from vcmc.model import profile_offsets


def _reference(codes, k, values, pi, prof):
    n_col = int(profile_offsets(k)[-1])
    lw = (np.log(pi)[None, :] + CATEGORICAL.log_likelihood_rows(codes, prof[:, :n_col], k)
          + GAUSSIAN.log_likelihood_rows(values, prof[:, n_col:], values.shape[1]))
    lw -= lw.max(axis=1, keepdims=True)
    w = np.exp(lw)
    return w / w.sum(axis=1, keepdims=True)


def _case(seed, n_comp, tiny=False):
    rng = np.random.default_rng(seed)
    n, k = 400, np.array([2, 3, 2, 4, 2, 2])
    codes = rng.integers(0, k, size=(n, k.size)).astype(np.int16)
    codes[rng.random(codes.shape) < 0.05] = -1
    values = rng.normal(0.0, 2.0, size=(n, 3))
    values[rng.random(values.shape) < 0.1] = np.nan
    values[0] = np.nan                                 # a row without any measurement
    offsets = profile_offsets(k)
    prof = np.empty((n_comp, int(offsets[-1]) + 6))
    for q in range(k.size):
        prof[:, offsets[q]:offsets[q + 1]] = rng.dirichlet(np.full(k[q], 0.7), size=n_comp)
    if tiny:        # baseline probabilities tiny or 0: ratios out of range, the exact fallback for some rows
        base = row_layout(codes, offsets).base_col
        for c, q, p in ((0, 1, 1e-290), (1, 3, 0.0)):
            prof[c, offsets[q]:offsets[q + 1]] = 1.0 / (k[q] - 1)
            prof[c, base[q]] = p
    prof[:, -6:-3] = rng.normal(0.0, 1.5, size=(n_comp, 3))
    prof[:, -3:] = rng.uniform(0.05, 3.0, size=(n_comp, 3))
    pi = rng.dirichlet(np.ones(n_comp))
    return codes, k, values, pi, prof


@pytest.mark.parametrize(("seed", "n_comp", "tiny"), [(0, 5, False), (1, 30, False), (2, 37, True)])
def test_probabilities_match_the_families(seed, n_comp, tiny):
    codes, k, values, pi, prof = _case(seed, n_comp, tiny)
    offsets = profile_offsets(k)
    lay = row_layout(codes, offsets)
    pidx, xstat, has_miss = mixed_rows(_table_index(codes, offsets), values, lay.row_of)
    out = np.empty((codes.shape[0], n_comp))
    n_fallback = _allocation_probabilities_mixed(lay.base_col, lay.ecol, lay.evar, lay.pexc_start, lay.pexc, pidx,
                                                 xstat, has_miss, offsets.astype(np.int64), np.log(pi), prof, out)
    ref = _reference(codes[lay.row_of], k, values[lay.row_of], pi, prof)
    assert np.allclose(out, ref, rtol=1e-12, atol=1e-300)
    assert (n_fallback > 0) == tiny
