"""Relaxed ELBO: gradients and curvature against finite differences, entropy, one round per evaluation."""

import numpy as np
import pytest

from vcmc.aggregation.elbo import Objective, evaluation_tuples, relaxed_elbo
from vcmc.aggregation.weights import BlockLayout, random_blocks, uniform_weights
from vcmc.config import PriorConfig
from vcmc.exceptions import ConfigError


@pytest.mark.parametrize("objective", ["complete", "observed"])
@pytest.mark.parametrize("tie", ["per_block", "per_cluster"])
def test_gradient_equals_finite_differences(make, nested, counts_fn, objective, tie):
    pr = make(0, n_rows=(60, 80, 100, 120), silo_weights=nested, n_modalities=(2, 3, 3), n_draws=40,
              missing_rate=0.1)
    m = pr.matched
    fn = counts_fn(pr)
    lay = BlockLayout.from_matched(m, tie)
    obj = Objective(m, lay, objective, PriorConfig(), fn)
    tup = obj.tuples(evaluation_tuples(m, 7, rng=1))
    blocks = random_blocks(lay, 2, rng=2, floor=0.05)
    (ev,) = obj.evaluate(blocks, [(tup, 1)])
    h = 1e-6
    for r in range(2):
        for b, s in zip(*np.nonzero(lay.mask), strict=True):
            up, dn = blocks.copy(), blocks.copy()
            up[r, b, s] += h
            dn[r, b, s] -= h
            f_up = obj.evaluate(up, [(tup, 0)])[0].value[r]
            fd = (f_up - obj.evaluate(dn, [(tup, 0)])[0].value[r]) / (2 * h)
            assert ev.grad[r, b, s] == pytest.approx(fd, rel=1e-5, abs=1e-4), (r, b, s)
        assert np.all(ev.grad[r][~lay.mask] == 0)


def test_curvature_is_the_hessian_of_the_complete_objective(make):
    # beta = 1.5 keeps every table entry positive, so the curvature is the exact negative Hessian
    pr = make(1, n_rows=(50, 70, 90), silo_weights=np.full((3, 3), 1 / 3), n_modalities=(2, 3), n_draws=30)
    m = pr.matched
    lay = BlockLayout.from_matched(m)
    obj = Objective(m, lay, "complete", PriorConfig(alpha=1.5, beta=1.5))
    tup = obj.tuples(evaluation_tuples(m, 9, rng=3))
    blocks = random_blocks(lay, 1, rng=4, floor=0.1)
    (ev,) = obj.evaluate(blocks, [(tup, 2)])
    h = 1e-5
    for b in range(lay.n_blocks):
        for t in range(3):
            up, dn = blocks.copy(), blocks.copy()
            up[0, b, t] += h
            dn[0, b, t] -= h
            g_up = obj.evaluate(up, [(tup, 1)])[0].grad[0, b]
            g_dn = obj.evaluate(dn, [(tup, 1)])[0].grad[0, b]
            np.testing.assert_allclose(-(g_up - g_dn) / (2 * h), ev.curv.dense()[0, b, :, t], rtol=1e-4, atol=1e-3)


def test_entropy_term_and_public_relaxed_elbo(make):
    pr = make(2, n_rows=(100, 100, 100, 100), n_modalities=(2, 3), n_draws=30)
    m = pr.matched
    tuples = evaluation_tuples(m, 11, rng=0)
    w = uniform_weights(m)
    value = relaxed_elbo(m, w, tuples=tuples)
    # by hand: every aggregated draw is the mean of the silos' draws; counts pooled over silos
    pihat = np.mean([p[i] for p, i in zip(m.pi, tuples, strict=True)], axis=0)
    phat = np.mean([p[i] for p, i in zip(m.profiles, tuples, strict=True)], axis=0)
    a = m.sizes.sum(0) + 0.01 - 1
    b = m.counts.sum(0) + 0.5 - 1
    data = np.mean(np.log(pihat) @ a + np.einsum("mcp,cp->m", np.log(phat), b))
    c = m.n_global
    # relaxed entropy: sum_b (d_b / |S_b|) sum_s log(1/4), d = C-1 for pi and K^q - 1 per profile block
    ent = (c - 1) * np.log(0.25) + c * (1 + 2) * np.log(0.25)
    assert value == pytest.approx(data + ent, rel=1e-12)


def test_observed_objective_uses_one_round_per_evaluation(make, counts_fn):
    pr = make(3, n_rows=(50, 50), silo_weights=np.full((2, 2), 0.5), n_modalities=(2, 2), n_draws=20)
    calls = []
    fn = counts_fn(pr, calls)
    lay = BlockLayout.from_matched(pr.matched)
    obj = Objective(pr.matched, lay, "observed", PriorConfig(), fn)
    t1 = obj.tuples(evaluation_tuples(pr.matched, 5, rng=0))
    t2 = obj.tuples(evaluation_tuples(pr.matched, 8, rng=1))
    obj.evaluate(random_blocks(lay, 3, rng=0), [(t1, 0), (t2, 2)])
    assert calls == [3 * 13] and obj.n_rounds == 1


def test_objective_errors(make):
    pr = make(4, n_draws=10)
    m = pr.matched
    lay = BlockLayout.from_matched(m)
    with pytest.raises(ConfigError, match="counts_fn"):
        Objective(m, lay, "observed", PriorConfig())
    with pytest.raises(ConfigError, match="objective"):
        Objective(m, lay, "marginal", PriorConfig())
