"""DisCGS adapted to categorical data (Khoufache et al. 2024/2025), one-shot discrete variant.

docs/design.md §11.4 (a comparator beyond the paper's). Each silo (worker) runs a collapsed
Gibbs sampler (CGS) for a mixture of products of Dirichlet-categorical components; it sends, per local
cluster of its last state, the member count and the contingency counts (Q x K^q). The server (master)
runs a collapsed Gibbs sampler in which the local clusters are indivisible units, and returns the
global cluster of each local cluster; each silo relabels its rows with it. One message each way.

Both samplers are the same compiled kernel over "units": a row is a unit of size one. For a unit ``h``
with size ``n_h``, per-variable observed totals ``n_{h,q}`` and counts ``n_{h,p}``, and a cluster ``g``
holding ``N_g`` rows (totals ``N_{g,q}``, counts ``N_{g,p}``) after removing ``h``:

    P(h -> g)   ∝ w(N_g) · m(T_g + T_h) / m(T_g)
    P(h -> new) ∝ w_new  · m(T_h)
    log m(T_g + T_h) - log m(T_g) = sum_q [lnΓ(B_q + N_{g,q}) - lnΓ(B_q + N_{g,q} + n_{h,q})]
                                    + sum_p [lnΓ(beta_p + N_{g,p} + n_{h,p}) - lnΓ(beta_p + N_{g,p})]

with ``B_q = sum of beta over variable q's block``. Partition weights: Dirichlet process ``w(N) = N``,
``w_new = alpha`` (DisCGS; for units this is DisCGS's approximation of the exact block weight
``Γ(N_g + n_h) / Γ(N_g)``, exact for rows), or the seed's over-fitted finite mixture collapsed over
``pi ~ Dir(alpha)`` with ``C+`` components: ``w(N) = N + alpha``, ``w_new = alpha (C+ - #occupied)``.
Missing values contribute to no count (their variable simply has a smaller total).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
from numba import njit

from vcmc._rng import as_seed_sequence, root_entropy
from vcmc.exceptions import ConfigError
from vcmc.model import MISSING, beta_per_column, one_hot_counts, profile_offsets
from vcmc.research.baselines.fed_kmodes import check_positive_int, check_silos
from vcmc.results import GlobalResult

NAME = "discgs"


# --------------------------------------------------------------------------------------------------
# The compiled kernel: one Gibbs sweep over units.
# --------------------------------------------------------------------------------------------------


@njit(cache=True)
def _deactivate(c, act, pos, free, n_act, n_free):
    """Remove the emptied cluster ``c`` from the active list (swap with the last) and free its slot."""
    i = pos[c]
    last = act[n_act - 1]
    act[i] = last
    pos[last] = i
    free[n_free] = c
    return n_act - 1, n_free + 1


@njit(cache=True)
def _draw_log_weights(logw, n, u):
    """Index drawn from the unnormalised log weights ``logw[:n]`` with the uniform ``u`` (log-sum-exp safe).

    Overwrites ``logw[:n]`` with the unnormalised weights. Returns ``n - 1`` when rounding puts ``u`` at
    the very top end, which the callers then handle as their last option.
    """
    m = logw[0]
    for i in range(1, n):
        if logw[i] > m:
            m = logw[i]
    total = 0.0
    for i in range(n):
        logw[i] = math.exp(logw[i] - m)
        total += logw[i]
    target = u * total
    acc = 0.0
    for i in range(n):
        acc += logw[i]
        if target < acc:
            return i
    return n - 1


@njit(cache=True)
def _lg_ratio(a, c):
    """lnΓ(a + c) - lnΓ(a) for a count c >= 0 (log(a) when c = 1, the row case, to skip two lgammas)."""
    if c == 0:
        return 0.0
    if c == 1:
        return math.log(a)
    return math.lgamma(a + c) - math.lgamma(a)


@njit(cache=True)
def _log_pred(k, h, ptr, cols, vals, qtot_u, counts, qtot, beta_col, beta_var, empty):
    """log m(T_k + T_h) - log m(T_k); with ``empty`` the prior predictive log m(T_h)."""
    out = 0.0
    nq = qtot_u.shape[1]
    for q in range(nq):
        n_hq = qtot_u[h, q]
        base = 0.0 if empty else qtot[k, q]
        out -= _lg_ratio(beta_var[q] + base, n_hq)
    for j in range(ptr[h], ptr[h + 1]):
        p = cols[j]
        base = 0.0 if empty else counts[k, p]
        out += _lg_ratio(beta_col[p] + base, vals[j])
    return out


@njit(cache=True)
def _sweep(u, ptr, cols, vals, qtot_u, size_u, labels, counts, qtot, size, act, n_act, pos, free, n_free,
           beta_col, beta_var, alpha, finite, cap):
    """One systematic-scan collapsed Gibbs sweep over all units; state arrays updated in place.

    ``act[:n_act]`` lists the occupied cluster slots (``pos`` their place in it), ``free[:n_free]``
    the empty slots. ``finite``: collapsed finite mixture with at most ``cap`` clusters; otherwise DP.
    Returns the new ``(n_act, n_free)``.
    """
    n_units = labels.shape[0]
    logw = np.empty(act.shape[0] + 1)
    for h in range(n_units):
        c = labels[h]
        # Remove unit h from its cluster.
        size[c] -= size_u[h]
        for q in range(qtot_u.shape[1]):
            qtot[c, q] -= qtot_u[h, q]
        for j in range(ptr[h], ptr[h + 1]):
            counts[c, cols[j]] -= vals[j]
        if size[c] == 0:
            n_act, n_free = _deactivate(c, act, pos, free, n_act, n_free)
        # Log weights of the occupied clusters and of a new one.
        for i in range(n_act):
            k = act[i]
            w = size[k] + alpha if finite else size[k]
            logw[i] = math.log(w) + _log_pred(k, h, ptr, cols, vals, qtot_u, counts, qtot, beta_col, beta_var,
                                              False)
        w_new = alpha * (cap - n_act) if finite else alpha
        if w_new > 0:
            logw[n_act] = math.log(w_new) + _log_pred(0, h, ptr, cols, vals, qtot_u, counts, qtot, beta_col,
                                                      beta_var, True)
        else:
            logw[n_act] = -np.inf
        choice = _draw_log_weights(logw, n_act + 1, u[h])
        if choice >= n_act and w_new <= 0:  # rounding at the top end: stay among occupied clusters
            choice = n_act - 1
        if choice == n_act:
            n_free -= 1
            k = free[n_free]
            act[n_act] = k
            pos[k] = n_act
            n_act += 1
        else:
            k = act[choice]
        labels[h] = k
        size[k] += size_u[h]
        for q in range(qtot_u.shape[1]):
            qtot[k, q] += qtot_u[h, q]
        for j in range(ptr[h], ptr[h + 1]):
            counts[k, cols[j]] += vals[j]
    return n_act, n_free


@njit(cache=True)
def _sweep_rows(u, ptr, cols, col_var, labels, counts, qtot, size, act, n_act, pos, free, n_free,
                beta_col, beta_var, log_beta_col, log_beta_var, lp, lq, alpha, finite, cap):
    """``_sweep`` specialised to units that are single rows (the worker's case), same law.

    For a row, ``lnΓ(a + 1) - lnΓ(a) = log a``, so the predictive is a sum of cached logs:
    ``lp[k, p] = log(beta_p + N_{k,p})`` and ``lq[k, q] = log(B_q + N_{k,q})``, refreshed only for the
    entries a move changes (2 Q logs per row instead of 2 Q per row and cluster).
    """
    n_units = labels.shape[0]
    logw = np.empty(act.shape[0] + 1)
    for h in range(n_units):
        c = labels[h]
        size[c] -= 1
        for j in range(ptr[h], ptr[h + 1]):
            p = cols[j]
            q = col_var[p]
            counts[c, p] -= 1
            qtot[c, q] -= 1
            lp[c, p] = math.log(beta_col[p] + counts[c, p])
            lq[c, q] = math.log(beta_var[q] + qtot[c, q])
        if size[c] == 0:
            n_act, n_free = _deactivate(c, act, pos, free, n_act, n_free)
        for i in range(n_act):
            k = act[i]
            w = size[k] + alpha if finite else size[k]
            acc = math.log(w)
            for j in range(ptr[h], ptr[h + 1]):
                p = cols[j]
                acc += lp[k, p] - lq[k, col_var[p]]
            logw[i] = acc
        w_new = alpha * (cap - n_act) if finite else alpha
        if w_new > 0:
            acc = math.log(w_new)
            for j in range(ptr[h], ptr[h + 1]):
                p = cols[j]
                acc += log_beta_col[p] - log_beta_var[col_var[p]]
            logw[n_act] = acc
        else:
            logw[n_act] = -np.inf
        choice = _draw_log_weights(logw, n_act + 1, u[h])
        if choice >= n_act and w_new <= 0:
            choice = n_act - 1
        if choice == n_act:
            n_free -= 1
            k = free[n_free]
            act[n_act] = k
            pos[k] = n_act
            n_act += 1
        else:
            k = act[choice]
        labels[h] = k
        size[k] += 1
        for j in range(ptr[h], ptr[h + 1]):
            p = cols[j]
            q = col_var[p]
            counts[k, p] += 1
            qtot[k, q] += 1
            lp[k, p] = math.log(beta_col[p] + counts[k, p])
            lq[k, q] = math.log(beta_var[q] + qtot[k, q])
    return n_act, n_free


# --------------------------------------------------------------------------------------------------
# Units and the sampler driver (used by the worker on rows and by the master on local clusters).
# --------------------------------------------------------------------------------------------------


def _units_from_counts(counts: np.ndarray, sizes: np.ndarray, n_modalities):
    """Sparse (CSR) units from a (H, P) count table: ``(ptr, cols, vals, qtot (H, Q), sizes)``."""
    offsets = profile_offsets(n_modalities)
    counts = np.asarray(counts, dtype=np.int64)
    rows, cols = np.nonzero(counts)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=counts.shape[0]))]).astype(np.int64)
    qtot = np.add.reduceat(counts, offsets[:-1], axis=1).astype(np.int64)
    return ptr, cols.astype(np.int64), counts[rows, cols].astype(np.int64), qtot, np.asarray(sizes, np.int64)


def _units_from_rows(codes: np.ndarray, n_modalities):
    """One unit per row (size one): the row's one-hot pattern in CSR form."""
    offsets = profile_offsets(n_modalities)
    n = codes.shape[0]
    obs = codes != MISSING
    ptr = np.concatenate([[0], np.cumsum(obs.sum(axis=1))]).astype(np.int64)
    r, q = np.nonzero(obs)
    cols = (offsets[q] + codes[r, q]).astype(np.int64)
    return ptr, cols, np.ones(cols.size, np.int64), obs.astype(np.int64), np.ones(n, np.int64)


def collapsed_gibbs(units, n_modalities, *, beta, alpha: float, n_sweeps: int, rng, init_labels,
                    finite: bool = False, n_components: int | None = None, trace: bool = False,
                    fast_rows: bool = True, label_trace: np.ndarray | None = None):
    """Run ``n_sweeps`` collapsed Gibbs sweeps over ``units`` from ``init_labels``.

    Parameters
    ----------
    units : tuple
        ``(ptr, cols, vals, qtot, sizes)`` as built by ``_units_from_rows`` / ``_units_from_counts``.
    beta : float or sequence
        Symmetric Dirichlet concentration of each profile (one value or one per variable).
    alpha : float
        DP concentration, or the finite mixture's Dirichlet concentration when ``finite``.
    init_labels : ndarray of int
        Starting cluster of every unit (any non-negative labels).
    trace : bool
        Also return the number of clusters after every sweep.
    fast_rows : bool
        Use the row-specialised kernel when every unit is a single row (same law, faster).
    label_trace : ndarray of shape (n_sweeps, n_units), optional
        Filled in place with the (uncompacted) cluster slot of every unit after every sweep.

    Returns
    -------
    labels : ndarray of int, compact ``0..K-1`` in order of first appearance
    n_clusters_trace : ndarray or None
    """
    ptr, cols, vals, qtot_u, size_u = units
    n_units = size_u.size
    offsets = profile_offsets(n_modalities)
    beta_col = beta_per_column(beta, n_modalities)
    beta_var = np.add.reduceat(beta_col, offsets[:-1])
    cap = n_units + 1
    _, labels = np.unique(np.asarray(init_labels), return_inverse=True)
    labels = labels.astype(np.int64).ravel()
    k0 = int(labels.max()) + 1
    if finite and k0 > n_components:
        raise ConfigError(f"collapsed_gibbs: the initial partition has {k0} clusters, more than "
                          f"n_components={n_components}.")
    p = int(offsets[-1])
    counts = np.zeros((cap, p), np.int64)
    qtot = np.zeros((cap, qtot_u.shape[1]), np.int64)
    size = np.zeros(cap, np.int64)
    unit_of_entry = np.repeat(np.arange(n_units), np.diff(ptr))
    np.add.at(counts, (labels[unit_of_entry], cols), vals)
    np.add.at(qtot, labels, qtot_u)
    np.add.at(size, labels, size_u)
    act = np.zeros(cap, np.int64)
    act[:k0] = np.arange(k0)
    pos = np.zeros(cap, np.int64)
    pos[:k0] = np.arange(k0)
    free = np.zeros(cap, np.int64)
    n_free = cap - k0
    free[:n_free] = np.arange(cap - 1, k0 - 1, -1)  # lowest free slot on top of the stack
    n_act = k0
    k_trace = np.empty(n_sweeps, np.int64) if trace else None
    cap_k = n_components if finite else cap
    rows = fast_rows and bool(np.all(size_u == 1)) and bool(np.all(vals == 1))
    if rows:
        col_var = np.repeat(np.arange(offsets.size - 1), np.diff(offsets)).astype(np.int64)
        lp = np.log(beta_col[None, :] + counts)
        lq = np.log(beta_var[None, :] + qtot)
        log_beta_col, log_beta_var = np.log(beta_col), np.log(beta_var)
    for it in range(n_sweeps):
        u = rng.random(n_units)  # uniforms drawn per sweep from the silo's own Generator
        if rows:
            n_act, n_free = _sweep_rows(u, ptr, cols, col_var, labels, counts, qtot, size, act, n_act, pos,
                                        free, n_free, beta_col, beta_var, log_beta_col, log_beta_var, lp, lq,
                                        float(alpha), finite, cap_k)
        else:
            n_act, n_free = _sweep(u, ptr, cols, vals, qtot_u, size_u, labels, counts, qtot, size, act, n_act,
                                   pos, free, n_free, beta_col, beta_var, float(alpha), finite, cap_k)
        if trace:
            k_trace[it] = n_act
        if label_trace is not None:
            label_trace[it] = labels
    _, first = np.unique(labels, return_index=True)
    order = labels[np.sort(first)]
    remap = np.empty(cap, np.int64)
    remap[order] = np.arange(order.size)
    return remap[labels], k_trace


# --------------------------------------------------------------------------------------------------
# Silo (worker) side and server (master) side.
# --------------------------------------------------------------------------------------------------


def silo_cgs(codes, n_modalities, *, beta, alpha: float, n_sweeps: int, rng, finite: bool,
             n_components: int, n_init_clusters: int):
    """Worker: CGS on the silo's rows; returns (row labels kept in the silo, sizes (H,), counts (H, P)).

    Starts from a uniform random allocation to ``n_init_clusters`` clusters.
    """
    units = _units_from_rows(codes, n_modalities)
    k0 = min(n_init_clusters, codes.shape[0])
    init = rng.integers(k0, size=codes.shape[0])
    labels, k_trace = collapsed_gibbs(units, n_modalities, beta=beta, alpha=alpha, n_sweeps=n_sweeps, rng=rng,
                                      init_labels=init, finite=finite, n_components=n_components, trace=True)
    h = int(labels.max()) + 1
    return labels, np.bincount(labels, minlength=h), one_hot_counts(codes, labels, h, n_modalities), k_trace


def server_cgs(sizes: Sequence[np.ndarray], counts: Sequence[np.ndarray], n_modalities, *, beta, alpha: float,
               n_sweeps: int, rng, finite: bool, n_components: int):
    """Master: CGS over all silos' local clusters as indivisible units.

    Starts from every unit in its own cluster (for the finite prior with more units than
    ``n_components``, unit ``h`` starts in cluster ``h mod n_components``). Returns ``(global label of
    each silo's local clusters, global sizes, global counts (G, P), trace of the number of clusters)``.
    """
    all_sizes = np.concatenate(sizes)
    all_counts = np.concatenate(counts, axis=0)
    units = _units_from_counts(all_counts, all_sizes, n_modalities)
    n_units = all_sizes.size
    init = np.arange(n_units) if not finite else np.arange(n_units) % n_components
    labels, k_trace = collapsed_gibbs(units, n_modalities, beta=beta, alpha=alpha, n_sweeps=n_sweeps, rng=rng,
                                      init_labels=init, finite=finite, n_components=n_components, trace=True)
    g = int(labels.max()) + 1
    g_sizes = np.bincount(labels, weights=all_sizes, minlength=g).astype(np.int64)
    g_counts = np.zeros((g, all_counts.shape[1]), np.int64)
    np.add.at(g_counts, labels, all_counts)
    split = np.cumsum([s.size for s in sizes])[:-1]
    return np.split(labels, split), g_sizes, g_counts, k_trace


def silo_memberships(codes, labels, g_sizes, g_counts, n_modalities, *, beta, alpha: float,
                     finite: bool) -> np.ndarray:
    """Each row's collapsed conditional probability of each global cluster, given the others' final state.

    Row-level, computed inside the silo from its rows and the global clusters' sizes and counts (cluster
    level): ``P(z_n = g | x_n, z_-n) ∝ w(N_g^{-n}) prod_q (beta_{x_nq} + N^{-n}_{g,x_nq}) / (B_q + N^{-n}_{g,q})``,
    the collapsed Gibbs sampler's own allocation probability of a row (module docstring, with the row
    removed from its cluster), renormalised over the G global clusters (opening a new cluster is not a
    membership of the result). ``w(N) = N + alpha`` (finite prior) or ``N`` with ``alpha`` for a row alone
    in its cluster (DP). Returns (n, G); docs/design.md §11.4.
    """
    offsets = profile_offsets(n_modalities)
    beta_col = beta_per_column(beta, n_modalities)
    beta_var = np.add.reduceat(beta_col, offsets[:-1])
    labels = np.asarray(labels, dtype=np.int64)
    n, g = labels.size, g_sizes.size
    own = np.zeros((n, g))
    own[np.arange(n), labels] = 1.0  # the row's own cluster loses the row
    size = g_sizes[None, :] - own
    log_p = np.log(size + alpha) if finite else np.log(np.where(size > 0, size, alpha))
    qtot = np.add.reduceat(g_counts, offsets[:-1], axis=1).astype(np.float64)
    for q in range(offsets.size - 1):
        x = codes[:, q]
        obs = x != MISSING
        col = offsets[q] + np.where(obs, x, 0)
        num = beta_col[col][:, None] + g_counts[:, col].T - own
        den = beta_var[q] + qtot[None, :, q] - own
        log_p += np.where(obs[:, None], np.log(num) - np.log(den), 0.0)
    log_p -= log_p.max(axis=1, keepdims=True)
    p = np.exp(log_p)
    return p / p.sum(axis=1, keepdims=True)


def _posterior_mean_profiles(counts, beta, n_modalities):
    """Dirichlet posterior means ``(beta + n_{g,p}) / (B_q + n_{g,q})`` given the final partition."""
    offsets = profile_offsets(n_modalities)
    a = counts + beta_per_column(beta, n_modalities)[None, :]
    tot = np.add.reduceat(a, offsets[:-1], axis=1)
    return a / np.repeat(tot, np.diff(offsets), axis=1)


def fit_discgs(silos: Sequence[np.ndarray], n_modalities, *, n_iter: int = 100,
               n_iter_master: int | None = None, beta=0.5, alpha_worker: float | None = None,
               alpha_master: float | None = None,
               prior: str = "finite", n_components: int = 15, n_init_clusters: int = 10, rng=None,
               silo_names=None) -> GlobalResult:
    """DisCGS for categorical data, one shot (docs/design.md §11.4).

    Parameters
    ----------
    silos : sequence of ndarray of shape (n_s, Q)
        Integer codes per silo, ``0..K^q - 1``, ``-1`` for missing.
    n_modalities : sequence of int
    n_iter : int
        Collapsed Gibbs sweeps in each worker (default 100).
    n_iter_master : int, optional
        Sweeps of the master over local clusters (default: ``n_iter``).
    beta : float or sequence of float
        Symmetric Dirichlet concentration of each profile (default 0.5, the seed's Jeffreys prior).
    alpha_worker, alpha_master : float, optional
        Concentrations. Defaults are DisCGS's hard-coded constants: ``0.1 n_s`` in a worker with
        ``n_s`` rows and ``0.1 H / S`` at the master with ``H`` local clusters from ``S`` silos (DP);
        for the finite prior both default to 0.01 (the seed's alpha).
    prior : {"finite", "dp"}
        The seed's over-fitted finite mixture with ``n_components`` components collapsed over its
        weights (default: the like-for-like comparison with VCMC), or Dirichlet-process partition
        weights as in DisCGS. With DisCGS's constants the DP version over-splits this kind of data
        badly (about 80-110 global clusters and ARI 0.3-0.5 on the paper's poor-separability designs,
        measured with ``benchmarks/comparators.py``), hence the default.
    n_components : int
        C+ for ``prior="finite"`` (default 15).
    n_init_clusters : int
        Workers start from a uniform random allocation to this many clusters (default 10).
    rng : int, Generator or None
        Root seed: one stream per worker and one for the master (``SeedSequence.spawn``).
    silo_names : sequence of str, optional

    Returns
    -------
    GlobalResult
        ``method="discgs"``: weights = global cluster shares of the last state, profiles = Dirichlet
        posterior means given that state; no intervals (DisCGS reports partitions only). ``memberships``:
        each row's collapsed conditional probability of each global cluster given the last state
        (``silo_memberships``); ``assignments``: the most probable cluster of each row.
        ``diagnostics``: local and global numbers of clusters per sweep, the local-to-global map.
    """
    t0 = time.perf_counter()
    owner = "fit_discgs"
    codes, mods, names = check_silos(silos, n_modalities, silo_names, owner=owner)
    n_iter = check_positive_int(n_iter, "n_iter", owner)
    n_iter_master = n_iter if n_iter_master is None else check_positive_int(n_iter_master, "n_iter_master",
                                                                             owner)
    n_init_clusters = check_positive_int(n_init_clusters, "n_init_clusters", owner)
    if prior not in ("dp", "finite"):
        raise ConfigError(f"The 'prior' parameter of {owner} must be one of 'finite', 'dp'. Got {prior!r} "
                          "instead.")
    finite = prior == "finite"
    if finite:
        n_components = check_positive_int(n_components, "n_components", owner, minimum=2)
        n_init_clusters = min(n_init_clusters, n_components)
    b = np.atleast_1d(np.asarray(beta, dtype=np.float64))
    if b.size not in (1, len(mods)) or not np.all(np.isfinite(b) & (b > 0)):
        raise ConfigError(f"The 'beta' parameter of {owner} must be a positive float or one per variable "
                          f"({len(mods)}). Got {beta!r} instead.")
    for name, val in (("alpha_worker", alpha_worker), ("alpha_master", alpha_master)):
        if val is not None and not (np.isfinite(val) and val > 0):
            raise ConfigError(f"The {name!r} parameter of {owner} must be None or a float in (0, inf). "
                              f"Got {val!r} instead.")
    seed = root_entropy(rng)
    master_seq, *worker_seqs = as_seed_sequence(rng).spawn(len(codes) + 1)

    t = time.perf_counter()
    local, worker_alphas = [], []
    for x, ws in zip(codes, worker_seqs, strict=True):
        a_w = alpha_worker if alpha_worker is not None else (0.01 if finite else 0.1 * x.shape[0])
        worker_alphas.append(a_w)
        local.append(silo_cgs(x, mods, beta=beta, alpha=a_w, n_sweeps=n_iter, rng=np.random.default_rng(ws),
                              finite=finite, n_components=n_components, n_init_clusters=n_init_clusters))
    t_local = time.perf_counter() - t

    t = time.perf_counter()
    n_units = sum(loc[1].size for loc in local)
    a_m = alpha_master if alpha_master is not None else (0.01 if finite else 0.1 * n_units / len(codes))
    l2g, g_sizes, g_counts, g_trace = server_cgs([loc[1] for loc in local], [loc[2] for loc in local], mods,
                                                 beta=beta, alpha=a_m, n_sweeps=n_iter_master,
                                                 rng=np.random.default_rng(master_seq), finite=finite,
                                                 n_components=n_components)
    t_server = time.perf_counter() - t

    final = [m[loc[0]] for m, loc in zip(l2g, local, strict=True)]  # the last state's global labels
    memberships = tuple(silo_memberships(x, z, g_sizes, g_counts, mods, beta=beta, alpha=a_m, finite=finite)
                        for x, z in zip(codes, final, strict=True))
    # the label is the row's most probable cluster, so assignments.csv and memberships.csv agree
    assignments = tuple(np.argmax(m, axis=1).astype(np.int64) for m in memberships)
    n_global = g_sizes.size
    partition = np.stack([np.bincount(a, minlength=n_global) for a in assignments]).astype(np.int64)
    timings = {"local": t_local, "server": t_server}
    timings["total"] = time.perf_counter() - t0
    return GlobalResult(
        method=NAME, n_modalities=mods, silos=names, weights=g_sizes / g_sizes.sum(),
        profiles=_posterior_mean_profiles(g_counts, beta, mods), partition_counts=partition,
        assignments=assignments, memberships=memberships, timings=timings,
        config={"n_iter": n_iter, "n_iter_master": n_iter_master, "beta": b.tolist(), "prior": prior,
                "alpha_worker": worker_alphas, "alpha_master": a_m,
                "n_components": n_components if finite else None, "n_init_clusters": n_init_clusters},
        seed=seed,
        diagnostics={"local_clusters_trace": [loc[3] for loc in local], "global_clusters_trace": g_trace,
                     "n_local_clusters": [int(loc[1].size) for loc in local],
                     "local_to_global": [m.copy() for m in l2g],
                     # rows whose most probable cluster is not their cluster in the last Gibbs state
                     "n_relabelled": int(sum(np.count_nonzero(a != z) for a, z in zip(assignments, final,
                                                                                     strict=True)))},
    )
