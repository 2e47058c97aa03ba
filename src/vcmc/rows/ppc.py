"""Model assessment inside the silo: posterior predictive checks, WAIC sums, sampled occupancy.

Everything here reads the silo's rows and returns whole-silo sums only (docs/design.md §14):

* **Predictive checks** (§14.1): for each of the R draws ``theta_r`` (the global profiles with this silo's
  own weights of the global clusters) one replicated dataset of the silo's size is simulated from the
  model: a fresh allocation ``z_i ~ pi_r`` per row, then every variable from its profile; a cell missing
  in the data is missing in the replicate, so observed and replicated counts have the same denominators.
  Returned: the counts of every modality and of the checked pairs of modalities in the data and in every
  replicate. The replicates are never materialised row by row: their counts are drawn from sufficient
  statistics (allocation counts per missingness pattern, multinomial modality counts per group), and only
  the cells of paired modalities are placed on rows to count co-occurrences (``_Replicator``).
* **WAIC** (§14.2): the sums over rows of ``lppd_i = log mean_r p(x_i | theta_r)``, of
  ``v_i = var_r log p(x_i | theta_r)`` (the variance over draws with divisor R, as ArviZ computes it) and
  of ``elpd_i = lppd_i - v_i``, with the sum of squared deviations of ``elpd_i`` for the standard error.
* **Occupancy** (§14.3): for each draw, allocations sampled from every row's allocation probabilities
  under ``theta_r``; only whether each global cluster received a row leaves the silo.

WAIC and occupancy run on the sampler's sparse layout (``vcmc.rows.row_kernels``): a row costs in
proportion to its cells that differ from the silo's most frequent code, identical rows once.

The silo's suppression and rounding (``PrivacyConfig``) are applied to the observed and the replicated
counts alike, so the check compares like with like (a predictive check of the disclosure-controlled
statistic is still a predictive check). Memory grows with the distinct rows (one float per distinct row and
cluster), never with rows x replicates.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vcmc._rng import RngLike, as_seed_sequence
from vcmc.config import PrivacyConfig
from vcmc.disclosure import pair_families, round_counts, suppress_small_cells
from vcmc.model import MISSING, profile_offsets, variable_of_column
from vcmc.rows.row_kernels import DrawTables, density_and_occupancy, place_and_tally

__all__ = ["assess_rows", "one_hot"]

# (missingness pattern, cluster) groups drawn at once in a replicate
_GROUPS = 1024


def one_hot(codes: np.ndarray, n_modalities, dtype=np.float64) -> np.ndarray:
    """Indicator matrix (n, P) of the codes: one 1 per observed cell, a row of zeros for a missing one."""
    codes = np.asarray(codes)
    offsets = profile_offsets(n_modalities)
    out = np.zeros((codes.shape[0], int(offsets[-1])), dtype=dtype)
    for q in range(codes.shape[1]):          # a loop over variables only
        x = codes[:, q]
        ok = np.flatnonzero(x != MISSING)
        out[ok, offsets[q] + x[ok]] = 1.0
    return out


@njit(cache=True)
def _tally(codes, offsets, in_pairs, pair_index, counts, pair_counts):  # pragma: no cover - numba
    """Add each row's modalities to ``counts`` (P,) and its checked pairs to ``pair_counts`` (E,).

    A row visits only its own observed modalities that take part in a pair (``in_pairs``), so a sparse
    row (a few conditions of 80) costs a few look-ups instead of E multiplications.
    """
    n, n_var = codes.shape
    active = np.empty(n_var, dtype=np.int64)
    for i in range(n):
        k = 0
        for q in range(n_var):
            x = codes[i, q]
            if x < 0:
                continue
            col = offsets[q] + x
            counts[col] += 1
            if in_pairs[col]:
                active[k] = col
                k += 1
        for a in range(k):
            for b in range(a + 1, k):
                e = pair_index[active[a], active[b]]
                if e >= 0:
                    pair_counts[e] += 1


def _disclosure(counts: np.ndarray, privacy: PrivacyConfig, n_modalities) -> tuple[np.ndarray, int]:
    """Suppression (complementary within each variable) then rounding of modality counts (..., P)."""
    table = np.atleast_2d(np.asarray(counts, dtype=np.int64))
    table, n_sup = suppress_small_cells(table, privacy.suppress_cells_below, n_modalities, round_to=privacy.round_to)
    return round_counts(table, privacy.round_to).reshape(np.shape(counts)), n_sup


def _disclosure_cells(counts: np.ndarray, privacy: PrivacyConfig, pairs, n_modalities) -> tuple[np.ndarray, int]:
    """Suppression and rounding of pair counts (..., E), complementary within the groups of pairs whose sums
    are modality counts (``pair_families``: a column paired with every column of another variable)."""
    out = np.atleast_2d(np.asarray(counts, dtype=np.int64))
    lead = np.arange(out.shape[0])[:, None] * max(out.shape[1], 1)
    families = [np.where(f[None, :] >= 0, lead + f[None, :], -1) for f in pair_families(pairs, n_modalities)]
    out, n_sup = suppress_small_cells(out, privacy.suppress_cells_below, n_modalities, round_to=privacy.round_to,
                                      families=families)
    return round_counts(out, privacy.round_to).reshape(np.shape(counts)), n_sup


def _missingness(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct missingness patterns of the rows: observed mask (M, Q) and number of rows (M,)."""
    seen = codes != MISSING
    if seen.shape[0] == 0:
        return np.zeros((0, seen.shape[1]), dtype=bool), np.zeros(0, dtype=np.int64)
    key = np.packbits(seen, axis=1)
    key = np.ascontiguousarray(key).view(np.dtype((np.void, key.shape[1]))).ravel()
    _, first, n_rows = np.unique(key, return_index=True, return_counts=True)
    return seen[first], n_rows.astype(np.int64)


def _block_probabilities(profiles: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Profiles (R, C, P) renormalised within every variable's block (the multinomial draws need sums of 1
    to the last bit); a block summing to 0 is left at 0."""
    out = np.array(profiles, dtype=np.float64, copy=True)
    for q in range(offsets.size - 1):           # a loop over variables only
        block = out[..., offsets[q]:offsets[q + 1]]
        total = block.sum(axis=-1, keepdims=True)
        np.divide(block, total, out=block, where=total > 0)
    return out


class _Replicator:
    """Replicated datasets of one silo drawn from sufficient statistics (docs/design.md §14.1).

    For replicate ``r``: the rows of each missingness pattern are allocated to the clusters by one
    multinomial draw of their number (``z_i ~ pi_r`` for each row, counted); the rows of a (pattern, cluster)
    group observed on variable ``q`` then have modality counts ``~ Multinomial(N, p^q_c)``, independently
    across variables and groups. Summed over groups these are the replicate's modality counts, exactly in
    distribution (jointly), with no row drawn. Pair counts need which rows hold which cells: only the cells
    of modalities in a checked pair are placed, on the group's rows (``row_kernels.place_and_tally``), so the
    work grows with those cells (on health records, the conditions present), not with rows x variables.
    """

    def __init__(self, codes: np.ndarray, n_mod: tuple[int, ...], offsets: np.ndarray, pairs: np.ndarray,
                 pair_index: np.ndarray):
        self.seen, self.n_rows = _missingness(codes)
        self.n_mod = n_mod
        self.offsets = offsets
        self.pairs = pairs
        self.pair_index = pair_index
        var = np.repeat(np.arange(len(n_mod)), n_mod)
        cols = np.unique(pairs.ravel()) if pairs.size else np.zeros(0, dtype=np.int64)
        self.var_cols = cols.astype(np.int64)                       # sorted: consecutive per variable
        self.var_start = np.searchsorted(var[cols], np.arange(len(n_mod) + 1)).astype(np.int64) \
            if cols.size else np.zeros(len(n_mod) + 1, dtype=np.int64)

    def replicate(self, gen: np.random.Generator, pi: np.ndarray, probs: np.ndarray, counts: np.ndarray,
                  pair_counts: np.ndarray) -> None:
        """Add the replicate's modality counts to ``counts`` (P,) and its pair counts to ``pair_counts`` (E,).

        ``pi`` (C,) the silo's weights of the draw, ``probs`` (C, P) its profiles, renormalised per variable.
        """
        total = pi.sum()
        if not total > 0:
            raise ValueError("assess: a weight draw sums to 0 (no cluster the rows could come from)")
        alloc = gen.multinomial(self.n_rows, pi / total)                  # (M, C)
        m_all, c_all = np.nonzero(alloc)
        n_all = alloc[m_all, c_all]
        # groups in chunks: with many missingness patterns (up to one per row) the (groups, P) tables stay small
        for start in range(0, m_all.size, _GROUPS):
            m_idx, c_idx = m_all[start:start + _GROUPS], c_all[start:start + _GROUPS]
            n_group = n_all[start:start + _GROUPS]
            cells = self._modality_counts(gen, m_idx, c_idx, n_group, probs, counts.size)
            counts += cells.sum(axis=0)
            if self.pairs.shape[0]:
                u = gen.random(int(cells[:, self.var_cols].sum()))
                place_and_tally(n_group, cells, self.var_start, self.var_cols, u, self.pair_index, pair_counts)

    def _modality_counts(self, gen, m_idx, c_idx, n_group, probs, n_col) -> np.ndarray:
        """Modality counts (groups, P) of the groups' rows: multinomial per observed variable."""
        cells = np.zeros((m_idx.size, n_col), dtype=np.int64)
        for k in sorted(set(self.n_mod)):                                  # variables with k modalities at once
            qs = np.flatnonzero(np.asarray(self.n_mod) == k)
            n = n_group[:, None] * self.seen[m_idx][:, qs]                 # 0 where the variable is missing
            cols = self.offsets[qs][:, None] + np.arange(k)[None, :]      # (|qs|, k)
            p = probs[c_idx][:, cols]                                      # (groups, |qs|, k)
            if k == 1:
                cells[:, cols[:, 0]] = n
            elif k == 2:
                one = gen.binomial(n, np.clip(p[:, :, 1], 0.0, 1.0))
                cells[:, cols[:, 0]] = n - one
                cells[:, cols[:, 1]] = one
            else:
                cells[:, cols.ravel()] = gen.multinomial(n, p).reshape(n.shape[0], -1)
        return cells


def occupancy_threshold(privacy: PrivacyConfig) -> int:
    """Rows a global cluster must receive in a sampled allocation to be sent as occupied: 1 (any row) without
    suppression or rounding; with either set, the minimum cluster size, so that ``occupied`` no longer answers
    "is anyone in this silo like this" (a cluster of one person reads as empty; docs/federation.md)."""
    protected = privacy.suppress_cells_below > 1 or privacy.round_to > 1 or privacy.dp_epsilon is not None
    return max(int(privacy.min_cluster_size), 1) if protected else 1


def assess_rows(codes: np.ndarray, n_modalities, pi: np.ndarray, profiles: np.ndarray, pairs: np.ndarray,
                *, rng: RngLike = None, privacy: PrivacyConfig | None = None,
                occupancy_at_least: int | None = None) -> dict:
    """The fields of an ``AssessReply`` for the rows ``codes`` (docs/design.md §14).

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        ``-1`` = missing.
    n_modalities : sequence of int
    pi : ndarray of shape (R, C)
        The silo's weights of the global clusters (0 where a cluster is absent).
    profiles : ndarray of shape (R, C, P)
        Global profile draws, paired with ``pi``.
    pairs : ndarray of shape (E, 2), int
        Flat profile columns of the co-occurrence check.
    rng : seed, SeedSequence or Generator
        Two independent streams are spawned from it: replicated datasets, sampled allocations.
    privacy : PrivacyConfig
        Suppression and rounding of the counts (DP noise is not applied, see ``PrivacyConfig``).
    occupancy_at_least : int, optional
        Rows a cluster must receive to be occupied (default ``occupancy_threshold(privacy)``).

    Returns
    -------
    dict
        ``n_rows``, ``n_observed``, ``observed``, ``replicated``, ``pair_n_observed``, ``pair_observed``,
        ``pair_replicated``, ``occupied``, ``lppd``, ``p_waic``, ``elpd``, ``elpd_m2``, ``n_suppressed``.
    """
    from vcmc.rows.memberships import row_layout

    privacy = PrivacyConfig() if privacy is None else privacy
    codes = np.asarray(codes)
    pi = np.ascontiguousarray(pi, dtype=np.float64)
    profiles = np.ascontiguousarray(profiles, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    n_mod = tuple(int(k) for k in n_modalities)
    offsets = profile_offsets(n_mod).astype(np.int64)
    var_col = variable_of_column(n_mod)
    n, _ = codes.shape
    r_draws, c = pi.shape
    p = int(offsets[-1])
    rep_ss, occ_ss = as_seed_sequence(rng).spawn(2)
    rep_gen, occ_gen = np.random.default_rng(rep_ss), np.random.default_rng(occ_ss)

    cols = np.unique(pairs.ravel())
    in_pairs = np.zeros(p, dtype=np.bool_)
    in_pairs[cols] = True
    pair_index = np.full((p, p), -1, dtype=np.int64)
    pair_index[pairs[:, 0], pairs[:, 1]] = np.arange(pairs.shape[0])
    pair_index[pairs[:, 1], pairs[:, 0]] = np.arange(pairs.shape[0])

    # the data's own counts (once): modalities and pairs by a pass over the rows, denominators from the
    # missingness patterns
    observed = np.zeros(p, dtype=np.int64)
    pair_obs = np.zeros(pairs.shape[0], dtype=np.int64)
    x = np.ascontiguousarray(codes, dtype=np.int64)
    _tally(x, offsets, in_pairs, pair_index, observed, pair_obs)
    seen, n_seen = _missingness(x)
    n_observed = (n_seen[:, None] * seen).sum(axis=0)[var_col]
    pair_n = (n_seen[:, None] * seen[:, var_col[pairs[:, 0]]] * seen[:, var_col[pairs[:, 1]]]).sum(axis=0)

    # replicated datasets from sufficient statistics
    replicated = np.zeros((r_draws, p), dtype=np.int64)
    pair_rep = np.zeros((r_draws, pairs.shape[0]), dtype=np.int64)
    replicator = _Replicator(x, n_mod, offsets, pairs, pair_index)
    probs = _block_probabilities(profiles, offsets)
    for r in range(r_draws):                 # a loop over draws only
        replicator.replicate(rep_gen, pi[r], probs[r], replicated[r], pair_rep[r])

    # WAIC and occupancy on the sparse layout: one pass over the distinct rows per draw
    lay, _ = row_layout(x, n_mod)
    n_pat = lay.n_patterns
    tables = DrawTables(lay.n_slots, n_pat, c)
    lp_max, lp_sum, lp_mean, lp_m2 = (np.zeros(n_pat) for _ in range(4))
    sampled = np.zeros((r_draws, c), dtype=np.int64)            # rows allocated to each cluster, per draw
    for r in range(r_draws):                 # a loop over draws only
        tables.fill(pi[r], profiles[r], lay)
        density_and_occupancy(tables.w, tables.lp, lay.pat_start, occ_gen.random(n), r + 1, lp_max, lp_sum,
                              lp_mean, lp_m2, sampled[r])
    at_least = occupancy_threshold(privacy) if occupancy_at_least is None else max(int(occupancy_at_least), 1)
    occupied = (sampled >= at_least).astype(np.int8)
    mult = np.diff(lay.pat_start).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lppd_u = lp_max + np.log(lp_sum) - np.log(r_draws)
    v_u = lp_m2 / r_draws                    # divisor R, as ArviZ's waic (docs/design.md §14.2)
    elpd_u = lppd_u - v_u
    elpd = float(mult @ elpd_u) if n_pat else 0.0
    mean_e = elpd / n if n else 0.0
    m2_e = float(mult @ (elpd_u - mean_e) ** 2) if n_pat else 0.0

    observed, n_sup = _disclosure(observed, privacy, n_mod)
    replicated, _ = _disclosure(replicated, privacy, n_mod)
    pair_obs, n_sup_pairs = _disclosure_cells(pair_obs, privacy, pairs, n_mod)
    pair_rep, _ = _disclosure_cells(pair_rep, privacy, pairs, n_mod)
    return {"n_rows": int(n),
            "n_observed": round_counts(n_observed.astype(np.int64), privacy.round_to),
            "observed": observed, "replicated": replicated,
            "pair_n_observed": round_counts(pair_n.astype(np.int64), privacy.round_to),
            "pair_observed": pair_obs, "pair_replicated": pair_rep, "occupied": occupied,
            "lppd": float(mult @ lppd_u) if n_pat else 0.0, "p_waic": float(mult @ v_u) if n_pat else 0.0,
            "elpd": elpd, "elpd_m2": m2_e, "n_suppressed": int(n_sup + n_sup_pairs)}


def indicator_columns(n_modalities) -> np.ndarray:
    """Flat columns checked for co-occurrence: the second modality of a binary variable (the first is its
    complement, and with the two prevalences the pair count fixes the whole 2 x 2 table), every modality
    of a variable with more."""
    offsets = profile_offsets(n_modalities)
    cols = [[offsets[q] + 1] if k == 2 else list(range(offsets[q], offsets[q + 1]))
            for q, k in enumerate(n_modalities)]
    return np.asarray([c for block in cols for c in block], dtype=np.int64)


def choose_pairs(weights: np.ndarray, profiles: np.ndarray, n_modalities, max_pairs: int) -> np.ndarray:
    """Pairs ``(a, b)`` of indicator columns of two different variables, at most ``max_pairs`` of them.

    When there are more, the ``max_pairs`` most frequent under the fitted model are kept: expected
    co-occurrence ``sum_c w_c p_{a,c} p_{b,c}`` at the posterior means (ties in column order). The choice
    uses the fitted model's estimates only (the server's, or the pooled chain's, which every silo has), so every
    silo checks the same pairs and no extra round is needed.
    """
    cols = indicator_columns(n_modalities)
    var = variable_of_column(n_modalities)[cols]
    a, b = np.triu_indices(cols.size, k=1)
    keep = var[a] != var[b]
    pairs = np.stack([cols[a[keep]], cols[b[keep]]], axis=1)
    if pairs.shape[0] <= max_pairs:
        return pairs.astype(np.int64)
    w = np.asarray(weights, dtype=np.float64)
    prof = np.asarray(profiles, dtype=np.float64)
    freq = np.einsum("c,ce,ce->e", w, prof[:, pairs[:, 0]], prof[:, pairs[:, 1]])
    top = np.sort(np.argsort(-freq, kind="stable")[:max_pairs])
    return pairs[top].astype(np.int64)
