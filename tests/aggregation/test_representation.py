"""Lean representations of the aggregation inputs: lazy matched profiles, pair layout, block curvature,
float32 draw storage and the scale-aware stopping rule."""

import numpy as np
import pytest

from vcmc.aggregation import aggregate
from vcmc.aggregation.elbo import Objective, evaluation_tuples
from vcmc.aggregation.optimize import _PLATEAU_WINDOW, _PLATEAU_Z, _plateau, newton_direction
from vcmc.aggregation.weights import BlockLayout, random_blocks
from vcmc.config import AggregationConfig, PriorConfig
from vcmc.dirichlet import sample_dirichlet_blocks
from vcmc.exceptions import ConfigError
from vcmc.matching.types import MatchedProfiles, Matching, build_matched_draws
from vcmc.model import profile_offsets
from vcmc.protocol import SiloSummary

N_MOD = (2, 3, 2)


def _summary(name, gen, k, n_draws=12, zero_pi_draw=None):
    p = int(sum(N_MOD))
    pi = gen.dirichlet(np.ones(k), size=n_draws)
    if zero_pi_draw is not None:
        draw, clusters = zero_pi_draw
        pi[draw, clusters] = 0.0
        pi[draw] /= pi[draw].sum()
    prof = sample_dirichlet_blocks(np.full((k, p), 0.7), N_MOD, n_draws, gen)
    sizes = np.full(k, 10)
    counts = np.ones((k, p), dtype=np.int64)
    return SiloSummary(silo=name, n_rows=100, n_modalities=N_MOD, schema_fingerprint="t", cluster_sizes=sizes,
                       pi_draws=pi, profile_draws=prof, pi_estimate=pi.mean(0), profile_estimate=prof.mean(0),
                       n_clusters_posterior=np.ones(k + 1) / (k + 1), counts=counts)


def _merged_problem():
    """Three silos; silo 0 merges local clusters 1 and 2 (one draw with both weights exactly 0)."""
    gen = np.random.default_rng(0)
    summaries = [_summary("a", gen, 4, zero_pi_draw=(5, [1, 2])), _summary("b", gen, 2), _summary("c", gen, 3)]
    matching = Matching(assignment=(np.array([0, 1, 1, 2]), np.array([3, 0]), np.array([2, 1, 3])),
                        n_global=4, method="test", silos=("a", "b", "c"))
    return summaries, matching


def _dense_reference(summ, assign, n_global):
    """docs/design.md §5.5 written out draw by draw: pi-weighted means of the merged local profiles."""
    t, _, p = summ.profile_draws.shape
    k = np.asarray(N_MOD)
    out = np.tile(np.repeat(1.0 / k, k), (t, n_global, 1))
    for c in range(n_global):
        local = np.flatnonzero(assign == c)
        for d in range(t):
            if local.size == 0:
                continue
            w = summ.pi_draws[d, local]
            prof = summ.profile_draws[d, local]
            out[d, c] = prof.mean(0) if w.sum() == 0 else (w[:, None] * prof).sum(0) / w.sum()
    return out


def test_matched_profiles_equal_the_merging_formula():
    summaries, matching = _merged_problem()
    md = build_matched_draws(summaries, matching)
    for s, summ in enumerate(summaries):
        prof = md.profiles[s]
        assert isinstance(prof, MatchedProfiles) and prof.shape == (12, 4, 7) and len(prof) == 12
        ref = _dense_reference(summ, matching.assignment[s], 4)
        np.testing.assert_allclose(np.asarray(prof), ref, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(prof.copy(), ref, rtol=1e-14, atol=1e-15)
        rows = np.array([5, 0, 5, 11])
        np.testing.assert_allclose(prof[rows], ref[rows], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(prof[3], ref[3], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(prof[:, [2, 0], :3], ref[:, [2, 0], :3], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(prof[2:7, 1], ref[2:7, 1], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(prof.take_clusters(rows, [3, 1], np.float32), ref[rows][:, [3, 1]],
                                   rtol=1e-6)
        # the merged weights are the sums of the local ones
        expected_pi = np.zeros((12, 4))
        for l, c in enumerate(matching.assignment[s]):
            expected_pi[:, c] += summ.pi_draws[:, l]
        np.testing.assert_allclose(md.pi[s], expected_pi, rtol=1e-15)
    # a single local cluster is passed through untouched (no pi p / pi round trip)
    np.testing.assert_array_equal(md.profiles[1][:, 3], summaries[1].profile_draws[:, 0])


def _nested_problem(make, nested, n_draws=30):
    return make(0, n_rows=(60, 80, 100, 120), silo_weights=nested, n_modalities=(2, 3, 3), n_draws=n_draws)


def _dense_value(m, blocks, layout, tuples, prior):
    """Relaxed ELBO of objective (a) from dense (S, M, C, P) arrays, as docs/design.md §6.4 writes it."""
    w0, w = layout.split(blocks[None])
    wcol = w[0][..., layout.var_of_col]                                 # (S, C, P)
    pihat = sum(w0[0, s] * m.pi[s][tuples[s]] for s in range(m.n_silos))
    phat = sum(wcol[s] * np.asarray(m.profiles[s])[tuples[s]] for s in range(m.n_silos))
    a = m.sizes.sum(0) + prior.alpha - 1
    b = m.counts.sum(0) + prior.beta - 1
    data = np.mean(np.log(pihat) @ a + np.einsum("mcp,cp->m", np.log(phat), b))
    ent = np.sum(layout.entropy_coef[:, None] * np.log(np.where(layout.mask, blocks, 1.0)))
    return data + ent


def test_pair_layout_value_with_structural_zeros(make, nested):
    pr = _nested_problem(make, nested)
    m = pr.matched
    assert not m.present.all()
    lay = BlockLayout.from_matched(m)
    obj = Objective(m, lay, "complete", PriorConfig())
    assert obj.n_pairs == int(m.present.sum())
    idx = evaluation_tuples(m, 9, rng=2)
    blocks = random_blocks(lay, 3, rng=5, floor=0.02)
    (ev,) = obj.evaluate(blocks, [(obj.tuples(idx), 0)])
    for r in range(3):
        assert ev.value[r] == pytest.approx(_dense_value(m, blocks[r], lay, idx, PriorConfig()), rel=1e-12)
        assert ev.per_tuple[r].mean() == pytest.approx(ev.value[r], rel=1e-12)


def test_block_curvature_newton_step_equals_the_dense_solve(make, nested):
    pr = _nested_problem(make, nested)
    m = pr.matched
    lay = BlockLayout.from_matched(m)
    obj = Objective(m, lay, "complete", PriorConfig())
    blocks = random_blocks(lay, 2, rng=1, floor=0.05)
    (ev,) = obj.evaluate(blocks, [(obj.tuples(evaluation_tuples(m, 11, rng=3)), 2)])
    dense = ev.curv.dense()
    both = lay.mask[:, :, None] & lay.mask[:, None, :]
    assert np.all(dense[:, ~both] == 0)
    np.testing.assert_allclose(dense, dense.transpose(0, 1, 3, 2), rtol=1e-12)
    # the constrained Newton step of every block from its own KKT system [[B, e], [e', 0]] [d, -l] = [g, 0]
    d = newton_direction(obj, blocks, ev.grad, ev.curv)
    for r in range(2):
        for b in range(lay.n_blocks):
            on = np.flatnonzero(lay.mask[b])
            k = on.size
            kkt = np.zeros((k + 1, k + 1))
            kkt[:k, :k] = dense[r, b][np.ix_(on, on)]
            kkt[:k, k] = kkt[k, :k] = 1.0
            sol = np.linalg.solve(kkt, np.append(ev.grad[r, b, on], 0.0))
            step = sol[:k]
            ratio = np.where(step < 0, -0.9 * blocks[r, b, on] / np.where(step < 0, step, 1.0), np.inf)
            np.testing.assert_allclose(d[r, b, on], step * min(1.0, ratio.min()), rtol=1e-6, atol=1e-9)
            assert np.all(d[r, b, ~lay.mask[b]] == 0)


def test_float32_draw_storage_gives_the_same_elbo_and_gradient(make, nested):
    pr = _nested_problem(make, nested)
    m = pr.matched
    lay = BlockLayout.from_matched(m)
    idx = evaluation_tuples(m, 13, rng=4)
    blocks = random_blocks(lay, 2, rng=6, floor=0.02)
    ev64, ev32 = (Objective(m, lay, "complete", PriorConfig(), draw_dtype=dt).evaluate(
        blocks, [(Objective(m, lay, "complete", PriorConfig(), draw_dtype=dt).tuples(idx), 2)])[0]
        for dt in (np.float64, np.float32))
    # float32 rounds each draw by at most 2^-24 relative, so every aggregated entry, its log and the
    # gradient's ratios x / xhat move by about 1e-7 relative
    np.testing.assert_allclose(ev32.value, ev64.value, rtol=1e-6)
    np.testing.assert_allclose(ev32.grad, ev64.grad, rtol=1e-5, atol=1e-6 * np.abs(ev64.grad).max())
    np.testing.assert_allclose(ev32.curv.dense(), ev64.curv.dense(), rtol=1e-5,
                               atol=1e-6 * np.abs(ev64.curv.dense()).max())
    with pytest.raises(ConfigError, match="draw_dtype"):
        Objective(m, lay, "complete", PriorConfig(), draw_dtype=np.int32)


def test_plateau_rule_waits_for_a_window_then_tests_the_gain():
    gen = np.random.default_rng(0)
    w, n = _PLATEAU_WINDOW, 400
    idx = np.array([0, 1])
    hist = np.zeros((2, w, n))
    noise = gen.normal(size=(2, n))
    stops = []
    for t in range(1, 3 * w + 1):
        # start 0 gains 1 per iteration on every tuple (plus noise of sd 1 around it): a steady climb;
        # start 1 only jitters (fresh noise of sd 1 each iteration): a plateau
        climb = t + noise[0] + 0.01 * gen.normal(size=n)
        jitter = gen.normal(size=n)
        stops.append(_plateau(hist, idx, np.stack([climb, jitter]), t, tol=0.1))
    stops = np.array(stops)
    assert not stops[:w].any()                         # no test before a full window
    assert not stops[w:, 0].any()                      # gain w = 10 against se 0.014 * sqrt(2)
    # a plateau: the gain over the window is N(0, 2/n); it stops unless it exceeds 2 se (about 2.3%)
    assert stops[w, 1]
    assert stops[w:, 1].mean() > 0.9


def test_plateau_rule_threshold_is_z_standard_errors():
    n, w = 100, _PLATEAU_WINDOW
    base = np.linspace(-1.0, 1.0, n)                   # paired differences of sd s = std(base, ddof=1)
    se = np.std(base, ddof=1) / np.sqrt(n)
    for gain, expected in ((0.9 * _PLATEAU_Z * se, True), (1.1 * _PLATEAU_Z * se, False)):
        hist = np.zeros((1, w, n))
        hist[0, 0] = 0.0
        stop = _plateau(hist, np.array([0]), (base + gain)[None], w + 1, tol=1e-9)
        assert stop[0] == expected


def test_plateau_stop_reaches_the_long_run_optimum(make):
    # from uniform weights on silos of unequal sizes the optimiser must climb first (docs/design.md §6.8)
    pr = make(3, n_rows=(100, 400, 1600, 3000), n_modalities=(2, 2, 3, 3), n_draws=400)
    m = pr.matched
    long = aggregate(m, config=AggregationConfig(tol=1e-9, max_iter=300), rng=1, init="uniform")
    res = aggregate(m, config=AggregationConfig(stop="plateau"), rng=1, init="uniform")
    assert res.converged and _PLATEAU_WINDOW < res.n_iter < 300
    # it did not stop during the climb: the first window gained far more than what is left
    trace = res.elbo_trace
    assert trace[_PLATEAU_WINDOW] - trace[0] > 100 * (long.elbo - res.elbo)
    # and what is left is within the Monte Carlo resolution of the evaluation tuples
    assert long.elbo - res.elbo < 1.0
    assert set(res.timings) == {"setup", "optimise", "push_forward"}


def test_stop_rule_is_validated():
    with pytest.raises(ConfigError, match="stop"):
        AggregationConfig(stop="relative")


def test_profile_offsets_cover_the_pair_layout_columns(make, nested):
    # the Gram matrices group columns by modality count: every column belongs to exactly one group
    pr = _nested_problem(make, nested, n_draws=5)
    obj = Objective(pr.matched, BlockLayout.from_matched(pr.matched), "complete", PriorConfig())
    cols = np.sort(np.concatenate([c.ravel() for c in obj._mod_cols.values()]))
    np.testing.assert_array_equal(cols, np.arange(profile_offsets(pr.matched.n_modalities)[-1]))


def test_lazy_and_dense_matched_profiles_aggregate_alike():
    # the same matched draws as views on the local draws and as dense arrays: the compiled gathers (single
    # local cluster) and the merging fallback must give what the dense arrays give
    import dataclasses

    summaries, matching = _merged_problem()
    lazy = build_matched_draws(summaries, matching)
    dense = dataclasses.replace(lazy, profiles=tuple(np.asarray(p) for p in lazy.profiles))
    cfg = AggregationConfig(max_iter=15)
    a, b = (aggregate(md, config=cfg, rng=7, n_out=30) for md in (lazy, dense))
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(a.weights.profiles, b.weights.profiles, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.profile_draws, b.profile_draws, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.pi_draws, b.pi_draws, rtol=1e-12, atol=1e-14)
    assert a.elbo == pytest.approx(b.elbo, rel=1e-12)
