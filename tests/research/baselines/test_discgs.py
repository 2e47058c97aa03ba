"""DisCGS for categorical data (docs/design.md §11.4): exact CGS law, unit predictive, one silo, recovery."""

import itertools

import numpy as np
import pytest
from scipy import special
from sklearn.metrics import adjusted_rand_score

from vcmc.exceptions import ConfigError
from vcmc.research.baselines.discgs import (
    _log_pred,
    _units_from_counts,
    _units_from_rows,
    collapsed_gibbs,
    fit_discgs,
    server_cgs,
    silo_cgs,
)
from vcmc.research.simulate import simulate_design


def _set_partitions(n):
    """All set partitions of range(n) as canonical label tuples (restricted growth strings)."""
    out = []
    for labels in itertools.product(range(n), repeat=n):
        if all(labels[i] <= max(labels[:i], default=-1) + 1 for i in range(n)):
            out.append(labels)
    return out


def _log_marginal(codes, mods, beta):
    """log m(T) of one block of rows under independent Dir(beta) per variable (missing skipped)."""
    out = 0.0
    for q, k in enumerate(mods):
        x = codes[:, q]
        x = x[x >= 0]
        n = np.bincount(x, minlength=k)
        out += special.gammaln(k * beta) - special.gammaln(k * beta + n.sum())
        out += np.sum(special.gammaln(beta + n) - special.gammaln(beta))
    return out


def _exact_posterior(codes, mods, beta, alpha, finite, n_components):
    parts = _set_partitions(codes.shape[0])
    logp = []
    for lab in parts:
        lab = np.asarray(lab)
        sizes = np.bincount(lab)
        k = sizes.size
        if finite:
            if k > n_components:
                logp.append(-np.inf)
                continue
            # Collapsed Dir(alpha) over C+ labelled components, times the C+!/(C+-K)! labellings.
            lp = (special.gammaln(n_components * alpha) - special.gammaln(n_components * alpha + lab.size)
                  + np.sum(special.gammaln(alpha + sizes) - special.gammaln(alpha))
                  + special.gammaln(n_components + 1) - special.gammaln(n_components - k + 1))
        else:  # Chinese restaurant process
            lp = (k * np.log(alpha) + np.sum(special.gammaln(sizes))
                  - np.sum(np.log(alpha + np.arange(lab.size))))
        lp += sum(_log_marginal(codes[lab == c], mods, beta) for c in range(k))
        logp.append(lp)
    logp = np.asarray(logp)
    return parts, np.exp(logp - special.logsumexp(logp))


def _canonical(labels):
    _, first = np.unique(labels, return_index=True)
    order = labels[np.sort(first)]
    remap = {int(c): i for i, c in enumerate(order)}
    return tuple(remap[int(c)] for c in labels)


@pytest.mark.parametrize(("finite", "fast_rows"), list(itertools.product([False, True], [True, False])))
def test_collapsed_gibbs_samples_the_exact_partition_posterior(finite, fast_rows):
    mods = (2, 3)
    codes = np.array([[0, 0], [0, 1], [1, 2], [1, -1], [0, 0]])
    beta, alpha, cplus = 0.7, 1.3, 3
    parts, exact = _exact_posterior(codes, mods, beta, alpha, finite, cplus)
    index = {p: i for i, p in enumerate(parts)}
    units = _units_from_rows(codes, mods)
    rng = np.random.default_rng(0)
    n_draws = 20000
    trace = np.empty((n_draws, codes.shape[0]), np.int64)
    collapsed_gibbs(units, mods, beta=beta, alpha=alpha, n_sweeps=n_draws, rng=rng,
                    init_labels=np.zeros(codes.shape[0], np.int64), finite=finite, n_components=cplus,
                    fast_rows=fast_rows, label_trace=trace)
    uniq, inv = np.unique(trace, axis=0, return_inverse=True)
    freq = np.zeros(len(parts))
    np.add.at(freq, [index[_canonical(u)] for u in uniq], np.bincount(inv.ravel(), minlength=len(uniq)))
    freq /= n_draws
    assert 0.5 * np.abs(freq - exact).sum() < 0.03  # total variation; Monte Carlo error is about 0.01
    if finite:
        assert freq[[len(set(p)) > cplus for p in parts]].sum() == 0


def test_unit_predictive_is_the_dirichlet_categorical_marginal_ratio():
    rng = np.random.default_rng(2)
    mods = (2, 3, 4)
    block_g = np.column_stack([rng.integers(k, size=30) for k in mods])
    block_h = np.column_stack([rng.integers(k, size=7) for k in mods])
    block_h[0, 1] = -1
    beta = 0.4
    from vcmc.model import one_hot_counts

    counts = np.vstack([one_hot_counts(block_g, np.zeros(30, int), 1, mods),
                        one_hot_counts(block_h, np.zeros(7, int), 1, mods)])
    ptr, cols, vals, qtot, _ = _units_from_counts(counts, np.array([30, 7]), mods)
    beta_col = np.full(sum(mods), beta)
    beta_var = np.array([k * beta for k in mods])
    got = _log_pred(0, 1, ptr, cols, vals, qtot, counts, qtot, beta_col, beta_var, False)
    want = _log_marginal(np.vstack([block_g, block_h]), mods, beta) - _log_marginal(block_g, mods, beta)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    got_new = _log_pred(0, 1, ptr, cols, vals, qtot, counts, qtot, beta_col, beta_var, True)
    np.testing.assert_allclose(got_new, _log_marginal(block_h, mods, beta), rtol=1e-10)


def test_one_silo_server_only_merges_local_clusters():
    data = simulate_design("homogeneous", "easy", rng=4, n_per_silo=600)
    x = data.silos[0].codes.astype(np.int64)
    rng = np.random.default_rng(0)
    local, sizes, counts, _ = silo_cgs(x, data.n_modalities, beta=0.5, alpha=0.01, n_sweeps=60, rng=rng,
                                       finite=True, n_components=15, n_init_clusters=10)
    l2g, g_sizes, g_counts, _ = server_cgs([sizes], [counts], data.n_modalities, beta=0.5, alpha=0.01,
                                           n_sweeps=60, rng=rng, finite=True, n_components=15)
    glob = l2g[0][local]
    # Every local cluster lies inside one global cluster, and the global tables are sums of local ones.
    for c in np.unique(local):
        assert np.unique(glob[local == c]).size == 1
    np.testing.assert_array_equal(np.bincount(glob), g_sizes)
    from vcmc.model import one_hot_counts

    np.testing.assert_array_equal(one_hot_counts(x, glob, g_sizes.size, data.n_modalities), g_counts)
    # Well-separated local clusters stay apart ("unchanged up to merges").
    assert adjusted_rand_score(local, glob) > 0.95


def test_recovers_nested_easy(nested_easy):
    silos = [s.codes for s in nested_easy.silos]
    res = fit_discgs(silos, nested_easy.n_modalities, rng=0)
    ari = adjusted_rand_score(nested_easy.pooled_labels, np.concatenate(res.assignments))
    assert ari >= 0.85
    assert 5 <= res.n_clusters <= 10
    assert res.method == "discgs" and res.weights_ci is None
    np.testing.assert_allclose(res.weights.sum(), 1.0)
    np.testing.assert_array_equal(res.partition_counts.sum(axis=1), nested_easy.n_per_silo)
    again = fit_discgs(silos, nested_easy.n_modalities, rng=0)
    np.testing.assert_array_equal(np.concatenate(again.assignments), np.concatenate(res.assignments))
    # Profiles are the Dirichlet posterior means given the last Gibbs state; the reported labels (each row's
    # most probable cluster) move only a few rows from that state.
    lab = np.concatenate(res.assignments)
    assert res.diagnostics["n_relabelled"] <= 0.02 * lab.size
    pooled = nested_easy.pooled_codes
    c = int(np.argmax(res.weights))
    n = np.bincount(pooled[lab == c, 0], minlength=2)
    np.testing.assert_allclose(res.profiles[c, :2], (0.5 + n) / (1.0 + n.sum()), atol=0.01)
    # Memberships: rows sum to 1, labels are their most probable cluster, and confident on easy data.
    memb = np.concatenate(res.memberships)
    np.testing.assert_allclose(memb.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(memb, axis=1), lab)
    assert np.median(memb.max(axis=1)) > 0.9


def test_memberships_are_the_collapsed_conditional():
    """Exact reference: a row's membership is the collapsed Gibbs conditional, computed by hand."""
    from vcmc.research.baselines.discgs import silo_memberships

    codes = np.array([[0, 1], [0, 1], [1, 0], [1, -1]])
    labels = np.array([0, 0, 1, 1])
    sizes = np.array([2, 2])
    counts = np.array([[2, 0, 0, 2], [0, 2, 1, 0]])  # columns: var 1 (0, 1), var 2 (0, 1)
    m = silo_memberships(codes, labels, sizes, counts, (2, 2), beta=0.5, alpha=0.01, finite=True)
    # row 3 = (1, missing), in cluster 1: without it cluster 0 has 2 rows with x1=0, cluster 1 one row x1=1
    p0 = (2 + 0.01) * (0.5 + 0) / (1 + 2)
    p1 = (1 + 0.01) * (0.5 + 1) / (1 + 1)
    np.testing.assert_allclose(m[3], [p0 / (p0 + p1), p1 / (p0 + p1)])
    np.testing.assert_allclose(m.sum(axis=1), 1.0)


def test_dp_prior_and_errors():
    data = simulate_design("homogeneous", "easy", rng=9, n_per_silo=200)
    silos = [s.codes for s in data.silos]
    res = fit_discgs(silos, data.n_modalities, prior="dp", n_iter=30, rng=1)
    assert res.config["prior"] == "dp" and res.n_clusters >= 1
    np.testing.assert_allclose(res.config["alpha_worker"], [20.0] * 4)  # DisCGS's 0.1 n_s
    with pytest.raises(ConfigError, match="'prior'"):
        fit_discgs(silos, data.n_modalities, prior="pitman-yor")
    with pytest.raises(ConfigError, match="'beta'"):
        fit_discgs(silos, data.n_modalities, beta=-1.0)
