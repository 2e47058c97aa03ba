"""The weight family: simplex projection (against a brute-force QP), block layout and baseline weights."""

import numpy as np
import pytest
from scipy.optimize import minimize

from vcmc.aggregation.weights import (
    AggregationWeights,
    BlockLayout,
    count_weights,
    inverse_variance_weights,
    project_simplex,
    random_weights,
    uniform_weights,
)
from vcmc.exceptions import ConfigError


def _qp(v, floor):
    """argmin ||w - v||^2 subject to w >= floor, sum w = 1, by SLSQP."""
    k = v.size
    res = minimize(lambda w: np.sum((w - v) ** 2), np.full(k, 1.0 / k), jac=lambda w: 2 * (w - v),
                   bounds=[(floor, 1.0)] * k, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0}],
                   method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    return res.x


@pytest.mark.parametrize("floor", [0.0, 1e-6, 0.05])
def test_projection_equals_brute_force_qp(floor, make, nested):
    gen = np.random.default_rng(0)
    v = gen.normal(scale=2.0, size=(40, 4))
    v[:5] = [0.9, 0.05, 0.03, 0.02]            # already feasible (for small floors)
    got = project_simplex(v, floor=floor)
    want = np.stack([_qp(row, floor) for row in v])
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.all(got >= floor - 1e-15)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


def test_projection_respects_masks_and_batches_of_blocks(make, nested):
    gen = np.random.default_rng(1)
    v = gen.normal(size=(3, 7, 4))
    mask = gen.random((7, 4)) < 0.6
    mask[:, 0] = True
    got = project_simplex(v, mask[None], floor=1e-6)
    assert np.all(got[:, ~mask] == 0.0)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-12)
    for r in range(3):
        for b in range(7):
            np.testing.assert_allclose(got[r, b, mask[b]], _qp(v[r, b, mask[b]], 1e-6), atol=1e-6)


def test_layout_round_trip_and_structural_zeros(make, nested):
    pr = make(0, n_rows=(300, 300, 300, 300), silo_weights=nested, n_draws=50)
    m = pr.matched
    w = random_weights(m, rng=1)
    lay = BlockLayout.from_matched(m)
    assert lay.n_blocks == 1 + m.n_global * len(m.n_modalities)
    blocks = lay.from_weights(w)
    back = lay.to_weights(blocks)
    np.testing.assert_allclose(back.pi, w.pi)
    np.testing.assert_allclose(back.profiles, w.profiles)
    # cluster 6 (index 5) lives only in silo 0: its blocks are fixed at 1 there and 0 elsewhere
    np.testing.assert_array_equal(w.profiles[:, 5, :], np.array([1.0, 0, 0, 0])[:, None].repeat(5, 1))
    tied = BlockLayout.from_matched(m, "per_cluster")
    assert tied.n_blocks == 1 + m.n_global
    with pytest.raises(ConfigError, match="per_cluster"):
        tied.from_weights(w)


def test_count_and_uniform_weights(make, nested):
    pr = make(1, n_rows=(100, 200, 300, 400), silo_weights=nested, n_draws=50)
    m = pr.matched
    cw = count_weights(m)
    np.testing.assert_allclose(cw.pi, [0.1, 0.2, 0.3, 0.4])
    for c in range(m.n_global):
        expect = m.sizes[:, c] / m.sizes[:, c].sum()
        np.testing.assert_allclose(cw.profiles[:, c, :], expect[:, None].repeat(5, 1))
    uw = uniform_weights(m)
    np.testing.assert_allclose(uw.pi, 0.25)
    np.testing.assert_allclose(uw.profiles[:, 2, 0], [1 / 3, 1 / 3, 1 / 3, 0])   # cluster 3: silos 1-3


def test_inverse_variance_weights_follow_silo_sizes(make, nested):
    # a homogeneous design: subposterior variances scale like 1/n_s, so Scott's weights are ~ n_s / n
    pr = make(2, n_rows=(250, 500, 1000, 2000), n_draws=4000)
    iv = inverse_variance_weights(pr.matched)
    share = np.array([250, 500, 1000, 2000]) / 3750
    np.testing.assert_allclose(iv.pi, share, atol=0.03)
    np.testing.assert_allclose(iv.profiles.mean(axis=(1, 2)), share, atol=0.03)
    np.testing.assert_allclose(iv.profiles.sum(axis=0), 1.0)


def test_weights_validation_message(make, nested):
    pr = make(3, n_draws=20)
    lay = BlockLayout.from_matched(pr.matched)
    with pytest.raises(ConfigError, match="shapes"):
        lay.from_weights(AggregationWeights(pi=np.ones(3) / 3, profiles=np.ones((3, 4, 5)) / 3))
    with pytest.raises(ConfigError, match="sum to 1"):
        lay.from_weights(AggregationWeights(pi=np.ones(4), profiles=np.ones((4, 4, 5)) / 4))
