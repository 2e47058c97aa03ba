"""The compiled kernels of labelling and assessment against the model's per-variable formula."""

import numpy as np

from vcmc.model import MISSING, log_likelihood_rows, profile_offsets
from vcmc.rows.memberships import row_layout
from vcmc.rows.row_kernels import DrawTables

N_MOD = (2, 3, 2, 4)


def _log_weights(codes, pi, prof):
    """Per row: log of the probabilities times the density (= the log weights), from the kernel."""
    lay, _ = row_layout(codes, N_MOD)
    tables = DrawTables(lay.n_slots, lay.n_patterns, pi.size)
    tables.fill(pi, prof, lay)
    with np.errstate(divide="ignore"):
        lw = np.log(tables.w) + tables.lp[:, None]
    out = np.empty((codes.shape[0], pi.size))
    out[lay.row_of] = np.repeat(lw, np.diff(lay.pat_start), axis=0)
    return out, lay


def test_log_weights_are_the_model_log_likelihood_with_missing_and_zero_probabilities():
    """Zero probabilities at a baseline code and elsewhere, an absent cluster, missing cells, repeated rows:
    the sparse-layout weights equal the per-variable product formula (and -inf exactly where it is)."""
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, k, 80) for k in N_MOD], axis=1)
    codes[:30] = codes[0]                                # identical rows share one computation
    codes[rng.random(codes.shape) < 0.2] = MISSING
    offsets = profile_offsets(N_MOD)
    lay, _ = row_layout(codes, N_MOD)
    prof = np.concatenate([rng.dirichlet(np.ones(k), size=3) for k in N_MOD], axis=1)
    base = int(lay.base_col[1])                          # the baseline code of variable 1 in cluster 1: 0
    prof[1, offsets[1]:offsets[2]] = 0.5
    prof[1, base] = 0.0
    prof[2, offsets[3] + 1] = 0.0                        # a non-baseline code impossible in cluster 2
    prof[2, offsets[3]:offsets[4]] /= prof[2, offsets[3]:offsets[4]].sum()
    pi = np.array([0.5, 0.5, 0.0])                       # an absent cluster
    got, lay = _log_weights(codes, pi, prof)
    assert lay.n_patterns < codes.shape[0]
    with np.errstate(divide="ignore"):
        expected = log_likelihood_rows(codes, pi, prof, N_MOD)
    assert np.isneginf(expected).sum() > codes.shape[0]  # the zeros are hit
    assert np.array_equal(np.isneginf(got), np.isneginf(expected))
    np.testing.assert_allclose(got[np.isfinite(got)], expected[np.isfinite(expected)], rtol=1e-12)
