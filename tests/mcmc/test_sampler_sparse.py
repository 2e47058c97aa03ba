"""Sparse path of the Gibbs sampler (vcmc.mcmc.sampler.kernels_sparse): baseline coding, allocation probabilities
against exact log space, count bookkeeping, the same transition law as the dense path, reproducibility and the
automatic choice of the path."""

import numpy as np
import pytest
from scipy import stats

import vcmc.mcmc.sampler.kernels_sparse as KS
import vcmc.mcmc.sampler.layout as LA
from vcmc.config import PriorConfig, SamplerConfig
from vcmc.exceptions import ConfigError
from vcmc.mcmc.sampler import draw_dirichlet, local_prior, log_joint, run_chain
from vcmc.model import MISSING, log_likelihood_rows, one_hot_counts, profile_offsets

K_PAPER = [2, 2, 2, 2, 3, 3, 3, 3, 3, 3]


def ehr_like(n, n_var, rng, *, n_clusters=5, low=0.01, high=0.3):
    """Binary 'conditions' with prevalences in [low, high], raised in each cluster's own few conditions."""
    rng = np.random.default_rng(rng)
    prev = np.exp(rng.uniform(np.log(low), np.log(high), n_var))
    labels = rng.integers(0, n_clusters, n)
    p = np.tile(prev, (n_clusters, 1))
    for c in range(n_clusters):
        p[c, rng.choice(n_var, 3, replace=False)] = 0.7
    return (rng.random((n, n_var)) < p[labels]).astype(np.int64)


def random_codes(n, k, rng, missing=0.0):
    rng = np.random.default_rng(rng)
    codes = np.stack([rng.integers(0, kq, n) for kq in k], axis=1)
    codes[rng.random(codes.shape) < missing] = MISSING
    return codes


def layout_of(codes, k):
    kk = np.asarray(k)
    return LA.sparse_layout(LA._check_codes(codes, kk), profile_offsets(kk))


def decode(lay, k, n):
    """Rows rebuilt from the layout alone: every cell at its variable's baseline, then the exceptions."""
    off = profile_offsets(k)
    x = np.tile(lay.base_col - off[:-1], (n, 1))
    for u in range(lay.n_patterns):
        rows = lay.row_of[lay.pat_start[u]:lay.pat_start[u + 1]]
        for s in lay.pexc[lay.pexc_start[u]:lay.pexc_start[u + 1]]:
            j, q = lay.ecol[s], lay.evar[s]
            x[rows, q] = MISSING if j >= off[-1] else j - off[q]
    return x


# ------------------------------------------------------------------------------------------- layout
def test_layout_encodes_rows_exactly_with_most_frequent_baselines():
    k = [2, 3, 4, 2, 3]
    codes = random_codes(400, k, rng=1, missing=0.15)
    codes[:, 3] = MISSING  # a variable never observed: every cell is a (missing) exception
    codes[:, 4] = np.where(codes[:, 4] == MISSING, MISSING, 2)  # one observed code only
    codes[:200] = codes[:1]  # many identical rows: shared patterns
    lay = layout_of(codes, k)
    off = profile_offsets(k)
    np.testing.assert_array_equal(decode(lay, k, codes.shape[0]), codes)
    for q, kq in enumerate(k):  # the most frequent observed code, ties to the smallest
        freq = np.bincount(codes[codes[:, q] != MISSING, q], minlength=kq)
        assert lay.base_col[q] == off[q] + np.argmax(freq)
    assert lay.base_col[3] == off[3] and lay.base_col[4] == off[4] + 2
    # patterns are the distinct rows; every row once; rows ascending within a pattern
    assert lay.n_patterns == np.unique(codes, axis=0).shape[0]
    np.testing.assert_array_equal(np.sort(lay.row_of), np.arange(codes.shape[0]))
    for u in range(lay.n_patterns):
        rows = lay.row_of[lay.pat_start[u]:lay.pat_start[u + 1]]
        assert (np.diff(rows) > 0).all() and (codes[rows] == codes[rows[0]]).all()
    base = lay.base_col - off[:-1]
    assert lay.n_row_exceptions == int(((codes != base) | (codes == MISSING)).sum())
    # slots: each occurring non-baseline code and missing column once, a variable's slots consecutive
    assert np.all(np.diff(lay.evar) >= 0) and np.unique(lay.ecol).size == lay.n_slots


def test_patterns_ordered_by_exception_count_are_the_same_rows_and_probabilities():
    # the sampler's order of the patterns (by number of exceptions: a predictable loop) changes only which
    # uniform a row gets: the same rows, and every row the same allocation probabilities
    k = [2] * 30
    codes = ehr_like(500, 30, rng=12)
    codes[:40] = codes[:1]  # a shared pattern
    codes[np.random.default_rng(2).random(codes.shape) < 0.05] = MISSING
    lay = layout_of(codes, k)
    srt = LA.by_exception_count(lay)
    assert (np.diff(np.diff(srt.pexc_start)) >= 0).all() and srt.n_patterns == lay.n_patterns
    np.testing.assert_array_equal(decode(srt, k, codes.shape[0]), codes)
    np.testing.assert_array_equal(np.sort(srt.row_of), np.arange(codes.shape[0]))
    rng = np.random.default_rng(3)
    n_comp = 12
    pi = draw_dirichlet(np.full(n_comp, 0.5), rng=rng)
    prof = _profiles(k, n_comp, 0.5, rng)
    per_row = []
    for layout in (lay, srt):
        out = np.full((layout.n_patterns, n_comp), np.nan)
        KS._allocation_probabilities_sparse(layout.base_col, layout.ecol, layout.evar, layout.pat_start,
                                            layout.pexc_start, layout.pexc, int(np.sum(k)), np.log(pi), prof, out)
        rows = np.empty((codes.shape[0], n_comp))
        rows[layout.row_of] = np.repeat(out, np.diff(layout.pat_start), axis=0)
        per_row.append(rows)
    np.testing.assert_allclose(per_row[1], per_row[0], rtol=1e-12, atol=0)
    np.testing.assert_allclose(per_row[0][lay.row_of[lay.pat_start[:-1]]], _exact(codes, k, pi, prof, lay),
                               rtol=1e-9, atol=1e-13)


def test_patterns_are_exact_even_when_every_hash_collides():
    k = [3, 3, 2]
    codes = random_codes(300, k, rng=2, missing=0.1)
    kk = np.asarray(k)
    _, _, _, row_start, rexc, hashes = LA._encode(LA._check_codes(codes, kk), profile_offsets(kk))
    collide = np.zeros_like(hashes)
    pat_start, row_of, pexc_start, pexc = LA._patterns(row_start, rexc, collide, np.arange(hashes.size))
    assert pat_start.size - 1 == np.unique(codes, axis=0).shape[0]
    for u in range(pat_start.size - 1):
        rows = row_of[pat_start[u]:pat_start[u + 1]]
        assert (codes[rows] == codes[rows[0]]).all()


# ------------------------------------------------------------------------------ allocation step
def _profiles(k, n_comp, conc, rng):
    prof = np.concatenate([draw_dirichlet(np.full(kq, conc), rng=rng, size=n_comp) for kq in k], axis=1)
    prof = np.maximum(prof, 1e-300)  # the reference needs every row possible under some component
    return prof / np.add.reduceat(prof, profile_offsets(k)[:-1], axis=1).repeat(k, axis=1)


def _sparse_probabilities(codes, k, pi, prof, logpi=None):
    lay = layout_of(codes, k)
    out = np.full((lay.n_patterns, pi.size), np.nan)
    n_fb = KS._allocation_probabilities_sparse(lay.base_col, lay.ecol, lay.evar, lay.pat_start,
                                               lay.pexc_start, lay.pexc, int(np.sum(k)),
                                               np.log(pi) if logpi is None else logpi, prof, out)
    return lay, out, n_fb


def _exact(codes, k, pi, prof, lay):
    ll = log_likelihood_rows(codes, pi, prof, k)
    return np.exp(ll - np.logaddexp.reduce(ll, axis=1, keepdims=True))[lay.row_of[lay.pat_start[:-1]]]


@pytest.mark.parametrize(("data", "k", "n_comp", "conc", "fallback"), [
    ("uniform", K_PAPER, 15, 0.5, False),  # the paper's variables, 16 lanes
    ("ehr", [2] * 80, 30, 0.1, None),  # sharp profiles, few exceptions per row, 32 lanes
    ("uniform", [2] * 80, 40, 0.5, False),  # ~40 exceptions per row, 40 lanes (32 + 8)
    ("uniform", [2, 3, 4, 5] * 5, 20, 50.0, False),  # flat multi-category profiles, 24 lanes (16 + 8)
    ("uniform", [3] * 200, 7, 1e-3, True),  # 200 variables, extreme profiles: far below range
    ("uniform", [4] * 10, 3, 1.0, False),  # 8 lanes
])
def test_allocation_probabilities_match_exact_log_space(data, k, n_comp, conc, fallback):
    rng = np.random.default_rng(5)
    codes = ehr_like(400, len(k), rng) if data == "ehr" else random_codes(400, k, rng)
    codes[rng.random(codes.shape) < 0.1] = MISSING
    pi = draw_dirichlet(np.full(n_comp, 0.3), rng=rng)
    prof = _profiles(k, n_comp, conc, rng)
    lay, out, n_fb = _sparse_probabilities(codes, k, pi, prof)
    # float64 products: relative error ~1e-14; factors flushed below 1e-300 change probabilities < 1e-100
    np.testing.assert_allclose(out, _exact(codes, k, pi, prof, lay), rtol=1e-9, atol=1e-13)
    if fallback is not None:
        # flat enough profiles stay in float64 range (every factor >~ 1e-3, at most ~50 of them), the
        # Dirichlet(0.001) ones over 200 variables do not: both code paths are exercised
        assert (n_fb > 0) == fallback


def test_zero_and_tiny_baseline_probabilities_are_exact():
    # sparse Dirichlet draws give exact zeros; a ratio over a zero (or < 1e-280) baseline probability would
    # overflow: those rows must take the exact fallback, which counts the zeros a row's exceptions cover
    k = [2, 3, 2, 2]
    off = profile_offsets(k)
    rng = np.random.default_rng(7)
    codes = random_codes(300, k, rng, missing=0.1)
    base = layout_of(codes, k).base_col - off[:-1]
    n_comp = 5
    pi = draw_dirichlet(np.ones(n_comp), rng=rng)
    prof = _profiles(k, n_comp, 1.0, rng)

    def only(c, q, code):  # component c certain of a non-baseline code of binary variable q
        prof[c, off[q]:off[q + 1]] = 0.0
        prof[c, off[q] + code] = 1.0

    only(1, 0, 1 - base[0])  # component 1: baseline of variable 0 impossible
    prof[2, off[1] + base[1]] = 1e-290  # component 2: baseline of variable 1 tiny but positive
    prof[2, off[1]:off[2]] /= prof[2, off[1]:off[2]].sum()
    only(3, 2, 1 - base[2])  # component 3: two zero baselines
    only(3, 3, 1 - base[3])
    lay, out, n_fb = _sparse_probabilities(codes, k, pi, prof)
    np.testing.assert_allclose(out, _exact(codes, k, pi, prof, lay), rtol=1e-9, atol=1e-13)
    x = codes[lay.row_of[lay.pat_start[:-1]]]
    # every row away from the baseline of variable 0 or 1 (missing included) meets a NaN ratio
    away = (x[:, 0] != base[0]) | (x[:, 1] != base[1])
    assert n_fb >= away.sum() > 0
    # component 3 is possible only for rows away from both of its zero baselines (missing counts as away)
    covers = (x[:, 2] != base[2]) & (x[:, 3] != base[3])
    assert (out[~covers, 3] == 0).all() and (out[covers, 3] > 0).all()


@pytest.mark.parametrize("n_comp", [3, 12, 20, 40])  # 8, 16, 24 and 40 lanes (block search with a loop)
def test_categorical_draw_maps_uniforms_to_the_probabilities(n_comp):
    # A pattern shared by m rows drawn with the uniforms (i + 1/2) / m: each component must get the grid
    # points of its interval, i.e. m * p_c of them up to one, and a zero-probability one (an empty lane, an
    # impossible component) none.
    k = [2, 3, 2]
    rng = np.random.default_rng(9)
    m = 4000
    codes = np.repeat(random_codes(6, k, rng), m // 6 + 1, axis=0)[:m]
    pi = draw_dirichlet(np.full(n_comp, 0.5), rng=rng)
    pi[1] = 0.0  # impossible component
    prof = _profiles(k, n_comp, 0.7, rng)
    lay = layout_of(codes, k)
    logpi = np.log(np.maximum(pi, 1e-320))
    logpi[1] = -800.0  # as the log-space Dirichlet gives it
    _, probs, _ = _sparse_probabilities(codes, k, np.maximum(pi, 0.0), prof, logpi=logpi)
    n_lane = -(-n_comp // 8) * 8
    n_slot = lay.n_slots
    bvec, rho = np.zeros(n_lane), np.zeros((n_slot, n_lane))
    lbase, nzero = np.empty(n_comp), np.empty(n_comp, dtype=np.int64)
    KS.fill_ratio_tables(logpi, prof, lay.base_col, lay.ecol, lay.evar, int(np.sum(k)), bvec, rho, lbase, nzero,
                           np.empty(0))
    ubuf = np.empty(m)
    for u in range(lay.n_patterns):  # the grid within each pattern's rows
        a, b = lay.pat_start[u], lay.pat_start[u + 1]
        ubuf[a:b] = (np.arange(b - a) + 0.5) / (b - a)
    zp = np.full(m, -1, dtype=np.int16)
    nc = np.zeros(n_comp, dtype=np.int64)
    KS._sparse_pass(bvec, rho, lay.pexc_start, lay.pexc, lay.pexc * np.uint32(n_lane), lay.pat_start, lbase, nzero,
                    prof, lay.base_col, lay.ecol, lay.evar, int(np.sum(k)), 0, ubuf, True, zp, nc,
                    np.zeros(n_slot * n_lane, dtype=np.int32), np.empty(2 * n_lane),
                    np.empty(2 * KS._pre_size(n_lane // 4)), np.empty(n_comp), np.empty((n_slot, n_comp)),
                    np.zeros((n_slot, n_comp), dtype=np.int64), np.full(n_slot, -1, dtype=np.int64),
                    np.empty((0, n_comp)))
    assert zp.min() >= 0 and zp.max() < n_comp
    np.testing.assert_array_equal(nc, np.bincount(zp, minlength=n_comp))
    for u in range(lay.n_patterns):
        a, b = lay.pat_start[u], lay.pat_start[u + 1]
        got = np.bincount(zp[a:b], minlength=n_comp)
        assert np.all(np.abs(got - (b - a) * probs[u]) <= 1.0 + 1e-9), u
        assert got[1] == 0 and np.all(got[probs[u] == 0] == 0)


# --------------------------------------------------------------------------------- counts
def test_derived_baseline_counts_equal_an_independent_count():
    k = [2, 3, 4, 2]
    rng = np.random.default_rng(3)
    codes = random_codes(500, k, rng, missing=0.2)
    n_comp = 6
    z = rng.integers(0, n_comp, 500)
    z[z == 4] = 0  # an empty component
    lay = layout_of(codes, k)
    nc, ct = KS.initial_counts(lay, z, n_comp, int(np.sum(k)) + len(k))
    np.testing.assert_array_equal(nc, np.bincount(z, minlength=n_comp))
    p = int(np.sum(k))
    np.testing.assert_array_equal(ct[:p].T, one_hot_counts(codes, z, n_comp, k))
    for q in range(len(k)):
        np.testing.assert_array_equal(ct[p + q], np.bincount(z[codes[:, q] == MISSING], minlength=n_comp))


def test_sparse_chain_bookkeeping_log_joint_and_occupancy():
    # the kept log joints are computed by the kernel from its derived counts: checked against numpy
    k = [2, 3, 3, 2]
    codes = ehr_like(150, 4, rng=4)
    codes[:, 1:3] = random_codes(150, [3, 3], rng=5)
    codes[np.random.default_rng(6).random(codes.shape) < 0.1] = MISSING
    prior = PriorConfig(n_components=6, alpha=0.5, beta=0.5)
    alpha, beta = local_prior(prior, k, n_silos=2)
    blocks = []
    run_chain(codes, k, prior=prior, sampler=SamplerConfig(n_iter=120, burn_in=20, thin=4, block_size=30),
              n_silos=2, rng=4, on_block=blocks.append, layout="sparse")
    assert sum(b.size for b in blocks) == 25
    for b in blocks:
        for t in range(b.size):
            assert b.n_occupied[t] == np.unique(b.z[t]).size
            expected = log_joint(codes, k, b.z[t], b.pi[t], b.profiles[t], alpha, beta)
            assert b.log_posterior[t] == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------------------ reproducibility
def test_sparse_same_seed_same_draws_whatever_the_block_size():
    codes = ehr_like(300, 30, rng=8)
    k = [2] * 30
    prior = PriorConfig(n_components=8)
    runs = [run_chain(codes, k, prior=prior, sampler=SamplerConfig(n_iter=150, burn_in=50, thin=5,
                                                                   block_size=b), rng=seed, layout="sparse")
            for b, seed in ((1000, 9), (7, 9), (1000, 10))]
    for field in ("pi", "profiles", "n_occupied", "log_posterior", "final_z"):
        np.testing.assert_array_equal(getattr(runs[0], field), getattr(runs[1], field))
    assert not np.array_equal(runs[0].pi, runs[2].pi)


# ----------------------------------------------------------------- same law as the dense path
@pytest.mark.parametrize("prior", [PriorConfig(n_components=4, alpha=0.5, beta=0.5),
                                   # tiny concentrations: exact zeros in the profiles, exact fallbacks
                                   PriorConfig(n_components=4, alpha=0.01, beta=0.01, fractionate=False)])
def test_sparse_and_dense_chains_have_the_same_law(prior):
    # Both paths start from the same law (uniform allocations, parameters given them) and, if their
    # transition kernels are the same, the state after any number of iterations has the same law: compare
    # the third iteration's state over independent chains with two-sample tests.
    k = [2, 3, 2, 4]
    codes = random_codes(24, k, rng=11, missing=0.25)
    codes[:12, 0] = 0  # some structure
    sampler = SamplerConfig(n_iter=3, burn_in=2, thin=1)
    n_chains = 1200
    draws = {}
    for layout in ("dense", "sparse"):
        out = []
        for seed in range(n_chains):
            d = run_chain(codes, k, prior=prior, sampler=sampler, n_silos=2, rng=seed, layout=layout)
            out.append((d.log_posterior[0], d.pi[0, 0], d.profiles[0, 1, 2], d.final_z[0], d.final_z[17],
                        d.n_occupied[0]))
        draws[layout] = np.array(out)
    dense, sparse = draws["dense"], draws["sparse"]
    for j in range(3):  # continuous: log joint, a weight, a profile entry
        assert stats.ks_2samp(dense[:, j], sparse[:, j]).pvalue > 1e-3
    for j in range(3, 6):  # discrete: two allocations (labels included) and the occupancy
        values = np.union1d(dense[:, j], sparse[:, j])
        table = np.stack([[np.sum(d[:, j] == v) for v in values] for d in (dense, sparse)])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table).pvalue > 1e-3


# ---------------------------------------------------------------------------------- path choice
def test_paper_data_keep_the_dense_path_and_its_draws():
    from vcmc.research.simulate import simulate_design

    k = np.asarray(K_PAPER)
    off = profile_offsets(k)
    for design in ("homogeneous", "nested", "non-nested"):
        for sep in ("easy", "poor"):
            for seed in range(3):
                silos = [s.codes for s in simulate_design(design, sep, rng=seed).silos]
                for x in [*silos, np.concatenate(silos)]:
                    path, _, est = LA.choose_layout(LA._check_codes(x, k), k, off, PriorConfig().n_components)
                    assert path == "dense", (design, sep, seed, est)
    codes = silos[0]
    cfg = dict(prior=PriorConfig(), sampler=SamplerConfig(n_iter=60, burn_in=20, thin=2), n_silos=4, rng=3)
    auto = run_chain(codes, K_PAPER, **cfg)
    dense = run_chain(codes, K_PAPER, layout="dense", **cfg)
    for field in ("pi", "profiles", "log_posterior", "final_z"):
        np.testing.assert_array_equal(getattr(auto, field), getattr(dense, field))


def test_ehr_like_data_take_the_sparse_path():
    codes = ehr_like(3000, 80, rng=12, n_clusters=20)
    k = np.full(80, 2)
    path, lay, est = LA.choose_layout(LA._check_codes(codes, k), k, profile_offsets(k), 30)
    assert path == "sparse" and est["sparse_ns"] < 0.5 * est["dense_ns"]
    assert 2 < est["exceptions_per_row"] < 12 and lay.n_slots == 80


def test_bad_layout_is_a_config_error():
    with pytest.raises(ConfigError, match="'layout'"):
        run_chain(np.zeros((4, 2), dtype=int), [2, 2], prior=PriorConfig(n_components=2),
                  sampler=SamplerConfig(n_iter=2, burn_in=0, thin=1), layout="fast")
