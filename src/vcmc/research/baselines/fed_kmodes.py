"""Federated K-modes: the Garst & Reinders federated K-means pipeline on categorical data.

docs/design.md §11.2. The seed paper's comparator (section 5.4): Garst & Reinders' federated K-means
(clients run a few local iterations from the server's centres, the server runs a count-weighted
clustering of the pooled local centres, empty clusters are dropped) with

* the simple-matching (Hamming) distance ``d(x, m) = sum_q 1[x_q != m_q]`` instead of the Euclidean one,
  missing values (``-1``) contributing nothing;
* modes instead of means as centres (per variable, the most frequent observed category);
* K fixed (the paper set it to the true number of clusters);
* one more server aggregation after the last round ("a server update at the end").

What crosses the silo boundary: local modes with their member counts (clusters with at most one member
are never sent), then, once, per final cluster the member count and the per-variable category counts
that give the "estimates" of weights and profiles (paper section 5.4.2: empirical shares). Nothing at
row level leaves a silo; the silo-side functions below are the only ones that touch rows.

Tie-breaking is deterministic everywhere: a row (or local mode) equidistant from several modes goes to
the one with the lowest index, and a mode's category is the lowest code among the most frequent ones
(the rule of the ``kmodes`` package). Randomness enters only through the k-modes++ seeding.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from vcmc._rng import as_generator, as_seed_sequence, root_entropy
from vcmc.data.codes import check_codes
from vcmc.exceptions import ConfigError, DataError
from vcmc.model import MISSING, one_hot_counts, profile_offsets
from vcmc.results import GlobalResult

NAME = "fed-kmodes"


# --------------------------------------------------------------------------------------------------
# Input checks shared by the comparators (fedmerdel.py and discgs.py import these).
# --------------------------------------------------------------------------------------------------


def check_silos(silos, n_modalities, silo_names=None, *, owner: str):
    """Validate the silos' code arrays and return ``(list of int64 arrays, modalities tuple, names)``.

    Errors name the silo and the column but never show data values (they may be raised inside a silo).
    """
    if isinstance(silos, np.ndarray) and silos.ndim == 2:
        raise DataError(f"{owner}: 'silos' must be a sequence of 2-D code arrays (one per silo), "
                        "got a single 2-D array; wrap it in a list for one silo.")
    silos = list(silos)
    if not silos:
        raise DataError(f"{owner}: 'silos' must hold at least one silo, got none.")
    mods = tuple(int(k) for k in np.atleast_1d(np.asarray(n_modalities)))
    if not mods or min(mods) < 2:
        raise ConfigError(f"{owner}: 'n_modalities' must list at least one variable, each with >= 2 "
                          f"modalities. Got {mods!r} instead.")
    if silo_names is None:
        names = tuple(f"silo{s}" for s in range(len(silos)))
    else:
        names = tuple(str(n) for n in silo_names)
        if len(names) != len(silos) or len(set(names)) != len(names):
            raise ConfigError(f"{owner}: 'silo_names' must give {len(silos)} distinct names (one per silo). "
                              f"Got {len(names)} names instead.")
    out = [check_codes(x, mods, where=f"{owner}: silo {name!r}", dtype=np.int64)
           for name, x in zip(names, silos, strict=True)]
    return out, mods, names


def check_positive_int(value, name: str, owner: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ConfigError(f"The {name!r} parameter of {owner} must be an int >= {minimum}. Got {value!r} "
                          "instead.")
    return int(value)


# --------------------------------------------------------------------------------------------------
# k-modes building blocks (row-level ones run inside a silo; weighted ones on the server).
# --------------------------------------------------------------------------------------------------


def mismatch_distance(codes: np.ndarray, modes: np.ndarray) -> np.ndarray:
    """Simple-matching distance of every row to every mode, shape (n, K), int.

    A missing entry (``-1``) contributes nothing: a row is compared only on its observed variables.
    """
    codes = np.asarray(codes)
    diff = (codes[:, None, :] != modes[None, :, :]) & (codes[:, None, :] != MISSING)
    return diff.sum(axis=2)


def assign_nearest(codes: np.ndarray, modes: np.ndarray) -> np.ndarray:
    """Index of the nearest mode of every row; ties go to the lowest mode index (``argmin``'s rule)."""
    return np.argmin(mismatch_distance(codes, modes), axis=1)


def weighted_category_counts(codes, labels, weights, n_clusters: int, n_modalities) -> np.ndarray:
    """Weighted contingency table (n_clusters, P): sum of ``weights`` of the members having each modality.

    Missing entries count nowhere, rows with a negative label are ignored.
    """
    codes = np.asarray(codes)
    offsets = profile_offsets(n_modalities)
    p = int(offsets[-1])
    out = np.zeros(n_clusters * p)
    keep = np.asarray(labels) >= 0
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), (codes.shape[0],))
    for q in range(codes.shape[1]):  # loop over the Q variables only; rows are vectorised
        ok = keep & (codes[:, q] != MISSING)
        idx = labels[ok] * p + offsets[q] + codes[ok, q]
        out += np.bincount(idx, weights=w[ok], minlength=n_clusters * p)
    return out.reshape(n_clusters, p)


def modes_from_counts(counts: np.ndarray, n_modalities, previous: np.ndarray | None = None) -> np.ndarray:
    """Per cluster and variable the most frequent category (lowest code on ties), shape (K, Q).

    A cluster with no observed value in a variable keeps its previous mode there (or category 0).
    """
    offsets = profile_offsets(n_modalities)
    k = counts.shape[0]
    modes = np.zeros((k, len(offsets) - 1), dtype=np.int64)
    for q in range(len(offsets) - 1):
        block = counts[:, offsets[q]:offsets[q + 1]]
        modes[:, q] = np.argmax(block, axis=1)  # argmax returns the first maximum: lowest code wins
        if previous is not None:
            empty = block.sum(axis=1) == 0
            modes[empty, q] = previous[empty, q]
    return modes


def kmodes_pp_init(codes: np.ndarray, n_clusters: int, n_modalities, rng, weights=None) -> np.ndarray:
    """k-modes++ seeding: first mode drawn by weight, each next one with probability ∝ weight × distance.

    The k-means++ rule (Arthur & Vassilvitskii 2007), which Garst & Reinders use, draws proportional to
    the squared Euclidean distance; on one-hot codes that is twice the mismatch count, hence the
    mismatch count here. Stops early when every remaining row coincides with a chosen mode (fewer than
    ``n_clusters`` distinct rows), so the modes returned are always distinct.
    """
    rng = as_generator(rng)
    n = codes.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    first = int(rng.choice(n, p=w / w.sum()))
    chosen = [first]
    dmin = mismatch_distance(codes, codes[first][None, :])[:, 0].astype(np.float64)
    while len(chosen) < n_clusters:
        score = w * dmin
        total = score.sum()
        if total <= 0:
            break
        nxt = int(rng.choice(n, p=score / total))
        chosen.append(nxt)
        dmin = np.minimum(dmin, mismatch_distance(codes, codes[nxt][None, :])[:, 0])
    modes = codes[chosen].copy()
    # A missing entry in a seed row has no category: fill it with the row set's most frequent one.
    if (modes == MISSING).any():
        overall = weighted_category_counts(codes, np.zeros(n, np.int64), w, 1, n_modalities)
        fill = modes_from_counts(overall, n_modalities)[0]
        modes = np.where(modes == MISSING, fill[None, :], modes)
    return modes


def kmodes_iterations(codes, modes, n_iter: int, n_modalities, weights=None):
    """``n_iter`` Lloyd-style k-modes iterations (assign to nearest, update modes), dropping empties.

    Returns ``(modes, labels, counts)``: the modes computed from the final assignment of the rows,
    the labels of that assignment (indices into the returned modes) and the summed weights of each
    cluster. Clusters that receive no row are dropped (Garst & Reinders' "drop"), never refilled.
    Stops early when the assignment no longer changes.
    """
    n = codes.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    labels = None
    for _ in range(n_iter):
        new = assign_nearest(codes, modes)
        size = np.bincount(new, weights=w, minlength=modes.shape[0])
        keep = size > 0
        if not keep.all():  # drop empty clusters and relabel compactly
            remap = np.cumsum(keep) - 1
            new = remap[new]
            modes = modes[keep]
        counts = weighted_category_counts(codes, new, w, modes.shape[0], n_modalities)
        if labels is not None and np.array_equal(new, labels):
            labels = new
            break
        labels = new
        modes = modes_from_counts(counts, n_modalities, previous=modes)
    if labels is None:  # n_iter == 0: only assign
        labels = assign_nearest(codes, modes)
    size = np.bincount(labels, weights=w, minlength=modes.shape[0])
    return modes, labels, size


# --------------------------------------------------------------------------------------------------
# Silo side: everything that touches rows. Each returns only cluster-level summaries.
# --------------------------------------------------------------------------------------------------


def silo_initial_modes(codes, n_modalities, n_clusters: int, local_iter: int, rng, init=None):
    """Client initialisation: k-modes++ seeding (or ``init``), ``local_iter`` iterations, small dropped.

    Returns ``(modes, counts)`` of the local clusters with more than one member (Garst & Reinders'
    privacy rule: a cluster of one is its member).
    """
    k = min(n_clusters, codes.shape[0])
    modes = kmodes_pp_init(codes, k, n_modalities, rng) if init is None else np.asarray(init, dtype=np.int64)
    modes, _, size = kmodes_iterations(codes, modes, local_iter, n_modalities)
    return _drop_small(modes, size)


def silo_update(codes, n_modalities, global_modes: np.ndarray, local_iter: int):
    """Client round: start from the server's modes, drop those no row is nearest to, iterate, send.

    Returns ``(modes, counts)`` of local clusters with more than one member.
    """
    modes, _, size = kmodes_iterations(codes, global_modes, local_iter, n_modalities)
    return _drop_small(modes, size)


def silo_final_counts(codes, n_modalities, global_modes: np.ndarray):
    """Label rows by the nearest final mode; return (labels kept in the silo, sizes, category counts).

    ``sizes`` (K,) and ``category_counts`` (K, P) are what the silo sends for the estimates.
    """
    labels = assign_nearest(codes, global_modes)
    k = global_modes.shape[0]
    sizes = np.bincount(labels, minlength=k)
    return labels, sizes, one_hot_counts(codes, labels, k, n_modalities)


def _drop_small(modes, size):
    keep = size > 1
    return modes[keep], size[keep].astype(np.int64)


# --------------------------------------------------------------------------------------------------
# Server side: works only on modes and counts.
# --------------------------------------------------------------------------------------------------


def server_weighted_kmodes(modes: np.ndarray, counts: np.ndarray, n_clusters: int, n_modalities, rng,
                           *, n_init: int = 10, max_iter: int = 100) -> np.ndarray:
    """Count-weighted k-modes over the pooled local modes, shape (K', Q) with K' <= ``n_clusters``.

    Objective ``sum_j counts_j min_g d(mode_j, global_g)`` (Garst & Reinders' server step with the
    mismatch distance). ``n_init`` k-modes++ restarts, the lowest objective kept (the first on ties).
    When the pooled modes hold at most ``n_clusters`` distinct rows they are returned as they are (no
    clustering is needed; with one silo the server then hands the local modes back unchanged).
    Global modes that end up with no local mode are dropped.
    """
    rng = as_generator(rng)
    uniq, inv = np.unique(modes, axis=0, return_inverse=True)
    w = np.bincount(inv.ravel(), weights=counts, minlength=uniq.shape[0])
    if uniq.shape[0] <= n_clusters:
        # Keep the silos' order rather than np.unique's sorted order (ties then favour earlier silos).
        first = np.array([np.flatnonzero(inv.ravel() == u)[0] for u in range(uniq.shape[0])])
        return uniq[np.argsort(first, kind="stable")]
    best, best_cost = None, np.inf
    for _ in range(n_init):
        init = kmodes_pp_init(uniq, n_clusters, n_modalities, rng, weights=w)
        g, labels, _ = kmodes_iterations(uniq, init, max_iter, n_modalities, weights=w)
        cost = float(np.sum(w * mismatch_distance(uniq, g)[np.arange(uniq.shape[0]), labels]))
        if cost < best_cost:
            best, best_cost = g, cost
    return best


# --------------------------------------------------------------------------------------------------
# The federated run.
# --------------------------------------------------------------------------------------------------


def fit_fed_kmodes(silos: Sequence[np.ndarray], n_modalities, *, n_clusters: int, rounds: int = 10,
                   local_iter: int = 1, server_n_init: int = 10, final_update: bool = True, init=None,
                   rng=None, silo_names=None) -> GlobalResult:
    """Federated K-modes (docs/design.md §11.2), the paper's weakest comparator.

    Parameters
    ----------
    silos : sequence of ndarray of shape (n_s, Q)
        Integer codes per silo, ``0..K^q - 1``, ``-1`` for missing.
    n_modalities : sequence of int
        K^q for each variable.
    n_clusters : int
        K, the number of global clusters (the paper set it to the truth). Fewer may come out: global
        modes no row is nearest to are dropped.
    rounds : int
        Server rounds R (default 10, as in Garst & Reinders' notebooks).
    local_iter : int
        k-modes iterations per client per round (default 1, their default).
    server_n_init : int
        k-modes++ restarts of the server's weighted k-modes (default 10).
    final_update : bool
        Aggregate the clients' last local modes once more (the seed's addition, default True); with
        False the result is the last round's server modes, as in Garst & Reinders' code.
    init : sequence of ndarray of shape (K_s, Q), optional
        Initial modes of each silo instead of k-modes++ seeding.
    rng : int, Generator or None
        Root seed; one stream per silo and one for the server (``SeedSequence.spawn``).
    silo_names : sequence of str, optional

    Returns
    -------
    GlobalResult
        ``method="fed-kmodes"``; weights and profiles are the empirical shares of the final clusters
        (a variable whose values are all missing in a cluster gets a uniform profile); no intervals.
        ``diagnostics`` holds the local cluster counts per round, the final global modes and the
        within-cluster mismatch cost.
    """
    t0 = time.perf_counter()
    owner = "fit_fed_kmodes"
    codes, mods, names = check_silos(silos, n_modalities, silo_names, owner=owner)
    n_clusters = check_positive_int(n_clusters, "n_clusters", owner)
    rounds = check_positive_int(rounds, "rounds", owner, minimum=0)
    local_iter = check_positive_int(local_iter, "local_iter", owner)
    server_n_init = check_positive_int(server_n_init, "server_n_init", owner)
    if init is not None and len(init) != len(codes):
        raise ConfigError(f"{owner}: 'init' must give one (K_s, Q) array of modes per silo ({len(codes)}), "
                          f"got {len(init)}.")
    seed = root_entropy(rng)
    ss = as_seed_sequence(rng)
    server_seq, *silo_seqs = ss.spawn(len(codes) + 1)
    server_rng = np.random.default_rng(server_seq)
    silo_rngs = [np.random.default_rng(s) for s in silo_seqs]

    timings = {"local": 0.0, "server": 0.0}
    t = time.perf_counter()
    local = [silo_initial_modes(x, mods, n_clusters, local_iter, r, None if init is None else init[s])
             for s, (x, r) in enumerate(zip(codes, silo_rngs, strict=True))]
    timings["local"] += time.perf_counter() - t
    n_local = [[m.shape[0] for m, _ in local]]
    global_modes = None
    for _ in range(rounds):
        t = time.perf_counter()
        global_modes = _aggregate(local, n_clusters, mods, server_rng, server_n_init, owner)
        timings["server"] += time.perf_counter() - t
        t = time.perf_counter()
        local = [silo_update(x, mods, global_modes, local_iter) for x in codes]
        timings["local"] += time.perf_counter() - t
        n_local.append([m.shape[0] for m, _ in local])
    if final_update or global_modes is None:
        t = time.perf_counter()
        global_modes = _aggregate(local, n_clusters, mods, server_rng, server_n_init, owner)
        timings["server"] += time.perf_counter() - t

    t = time.perf_counter()
    finals = [silo_final_counts(x, mods, global_modes) for x in codes]
    timings["local"] += time.perf_counter() - t
    sizes = np.stack([f[1] for f in finals])
    cat = np.sum([f[2] for f in finals], axis=0)
    keep = sizes.sum(axis=0) > 0  # global modes nearest to no row at all are dropped
    remap = np.cumsum(keep) - 1
    sizes, cat, global_modes = sizes[:, keep], cat[keep], global_modes[keep]
    assignments = tuple(remap[f[0]] for f in finals)
    weights = sizes.sum(axis=0) / sizes.sum()
    profiles = _empirical_profiles(cat, mods)
    cost = int(sum(mismatch_distance(x, global_modes)[np.arange(x.shape[0]), a].sum()
                   for x, a in zip(codes, assignments, strict=True)))
    timings["total"] = time.perf_counter() - t0
    return GlobalResult(
        method=NAME, n_modalities=mods, silos=names, weights=weights, profiles=profiles,
        partition_counts=sizes.astype(np.int64), assignments=assignments, timings=timings,
        config={"n_clusters": n_clusters, "rounds": rounds, "local_iter": local_iter,
                "server_n_init": server_n_init, "final_update": final_update,
                "init": "given" if init is not None else "k-modes++", "distance": "mismatch",
                "tie_breaking": "lowest index"},
        seed=seed,
        diagnostics={"global_modes": global_modes, "local_clusters_per_round": n_local, "cost": cost},
    )


def _aggregate(local, n_clusters, mods, rng, n_init, owner):
    modes = np.concatenate([m for m, _ in local])
    counts = np.concatenate([c for _, c in local]).astype(np.float64)
    if modes.shape[0] == 0:
        raise DataError(f"{owner}: no silo has a local cluster with more than one member; every silo must "
                        "hold at least two rows for federated K-modes.")
    return server_weighted_kmodes(modes, counts, n_clusters, mods, rng, n_init=n_init)


def _empirical_profiles(cat: np.ndarray, mods) -> np.ndarray:
    """Within-cluster category shares per variable (uniform where a variable has no observed value)."""
    offsets = profile_offsets(mods)
    out = np.empty(cat.shape, dtype=np.float64)
    for q in range(len(mods)):
        block = cat[:, offsets[q]:offsets[q + 1]].astype(np.float64)
        tot = block.sum(axis=1, keepdims=True)
        out[:, offsets[q]:offsets[q + 1]] = np.where(tot > 0, block / np.maximum(tot, 1), 1.0 / mods[q])
    return out
