"""Space-filling starts: inverse Rosenblatt onto the simplex and the Latin hypercube over all blocks."""

import numpy as np
from scipy import stats

from vcmc.aggregation.designs import inverse_rosenblatt_simplex, latin_hypercube_blocks
from vcmc.aggregation.weights import BlockLayout


def test_inverse_rosenblatt_maps_uniform_cube_to_uniform_simplex(make, nested):
    gen = np.random.default_rng(0)
    k = 4
    w = inverse_rosenblatt_simplex(gen.random((20000, k - 1)))
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    # every coordinate of a uniform (Dirichlet(1)) point on the simplex is Beta(1, k - 1)
    for j in range(k):
        assert stats.kstest(w[:, j], stats.beta(1, k - 1).cdf).pvalue > 1e-3
    # the corners of the cube go to the vertices
    np.testing.assert_allclose(inverse_rosenblatt_simplex(np.zeros((1, 3))), [[0, 0, 0, 1]])


def test_latin_hypercube_blocks_are_feasible_and_stratified(make, nested):
    pr = make(0, n_rows=(100,) * 4, silo_weights=nested, n_draws=10)
    lay = BlockLayout.from_matched(pr.matched)
    n = 50
    b = latin_hypercube_blocks(lay, n, rng=1, floor=1e-6)
    assert b.shape == (n, lay.n_blocks, 4)
    assert np.all(b[:, ~lay.mask] == 0)
    assert np.all(b[:, lay.mask] >= 1e-6 - 1e-15)
    np.testing.assert_allclose(b.sum(axis=2), 1.0)
    # the first weight of a 4-silo block is Beta(1, 3): its CDF values are one per stratum of [0, 1]
    u = stats.beta(1, 3).cdf(b[:, 0, 0])
    np.testing.assert_array_equal(np.sort(np.floor(u * n).astype(int)), np.arange(n))
    # reproducible from the seed
    np.testing.assert_array_equal(b, latin_hypercube_blocks(lay, n, rng=1, floor=1e-6))
