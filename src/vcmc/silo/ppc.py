"""Model assessment inside the silo: posterior predictive checks, WAIC sums, sampled occupancy.

Everything here reads the silo's rows and returns whole-silo sums only (docs/design.md §14):

* **Predictive checks** (§14.1): for each of the R draws ``theta_r`` (the global profiles with this silo's
  own weights of the global clusters) one replicated dataset of the silo's size is simulated from the
  model: a fresh allocation ``z_i ~ pi_r`` per row, then every variable from its profile; a cell missing
  in the data is missing in the replicate, so observed and replicated counts have the same denominators.
  Returned: the counts of every modality and of the checked pairs of modalities in the data and in every
  replicate.
* **WAIC** (§14.2): the sums over rows of ``lppd_i = log mean_r p(x_i | theta_r)``, of
  ``v_i = var_r log p(x_i | theta_r)`` (the variance over draws with divisor R, as ArviZ computes it) and
  of ``elpd_i = lppd_i - v_i``, with the sum of squared deviations of ``elpd_i`` for the standard error.
* **Occupancy** (§14.3): for each draw, allocations sampled from every row's allocation probabilities
  under ``theta_r``; only whether each global cluster received a row leaves the silo.

The silo's suppression and rounding (``PrivacyConfig``) are applied to the observed and the replicated
counts alike, so the check compares like with like (a predictive check of the disclosure-controlled
statistic is still a predictive check). Rows are processed in blocks of ``_ROWS`` so memory does not
grow with the silo.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from vcmc._rng import RngLike, as_seed_sequence
from vcmc.config import PrivacyConfig
from vcmc.model import MISSING, profile_offsets, variable_of_column
from vcmc.silo.disclosure import round_counts, suppress_small_cells

__all__ = ["assess_rows", "one_hot", "row_log_density"]

_ROWS = 4096


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


def _log_terms(pi: np.ndarray, profiles: np.ndarray):
    """``log pi`` and ``log p`` with zeros kept apart: (log pi (C,), finite log p (C, P), zero mask or None).

    A zero probability makes ``0 * log 0`` appear in the matrix product of the indicators; the product is
    taken with 0 in place of ``log 0`` and the rows that hit a zero get ``-inf`` through the mask.
    """
    with np.errstate(divide="ignore"):
        logpi = np.log(pi)
        zero = profiles <= 0
        logp = np.where(zero, 0.0, np.log(np.where(zero, 1.0, profiles)))
    return logpi, logp, (zero.astype(np.float64) if zero.any() else None)


def row_log_density(x: np.ndarray, pi: np.ndarray, profiles: np.ndarray):
    """Per-row, per-component ``log pi_c prod_q p^q_{x_iq, c}`` (n, C) from indicators ``x`` (n, P).

    The same numbers as ``vcmc.model.log_likelihood_rows`` (missing cells contribute nothing), computed
    as one matrix product per draw: BLAS is several times faster than a gather per variable.
    """
    logpi, logp, zero = _log_terms(pi, profiles)
    out = x @ logp.T + logpi
    if zero is not None:
        out[(x @ zero.T) > 0] = -np.inf
    return out


def _pair_counts(x: np.ndarray, pairs: np.ndarray, cols: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Rows having both modalities of each pair: ``sum_i x[i, a] x[i, b]`` for the pairs (E,)."""
    if pairs.shape[0] == 0:
        return np.zeros(0)
    xi = x[:, cols]
    if cols.size * cols.size <= 20 * pairs.shape[0]:    # few distinct columns: one Gram matrix (BLAS)
        gram = xi.T @ xi
        return gram[where[:, 0], where[:, 1]]
    return np.einsum("ie,ie->e", xi[:, where[:, 0]], xi[:, where[:, 1]])


def _replicate(codes: np.ndarray, cum_pi: np.ndarray, cum_prof: np.ndarray, var_col: np.ndarray,
               offsets: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """One replicated block of rows: ``z_i ~ pi``, each variable from its profile by inverse CDF.

    ``cum_prof`` holds the cumulative probabilities within each variable block with its last column set
    above 1, so the count of thresholds a uniform exceeds is the sampled modality (0..K-1) whatever the
    rounding of the cumulative sums. Missing cells of the data stay missing.
    """
    n, q = codes.shape
    # scaling the uniforms by the total keeps a cluster of weight 0 (absent from the silo) out whatever the
    # rounding of the cumulative sum
    z = np.searchsorted(cum_pi, gen.random(n) * cum_pi[-1], side="right")
    u = gen.random((n, q))
    exceed = u[:, var_col] >= cum_prof[z]
    rep = np.add.reduceat(exceed, offsets[:-1], axis=1).astype(np.int64)
    rep[codes == MISSING] = MISSING
    return rep


def _disclosure(counts: np.ndarray, privacy: PrivacyConfig, n_modalities) -> tuple[np.ndarray, int]:
    """Suppression (complementary within each variable) then rounding of modality counts (..., P)."""
    table = np.atleast_2d(np.asarray(counts, dtype=np.int64))
    table, n_sup = suppress_small_cells(table, privacy.suppress_cells_below, n_modalities)
    return round_counts(table, privacy.round_to).reshape(np.shape(counts)), n_sup


def _disclosure_cells(counts: np.ndarray, privacy: PrivacyConfig) -> tuple[np.ndarray, int]:
    """Cell-wise suppression and rounding of pair counts (each pair is its own one-cell table)."""
    out = np.array(counts, dtype=np.int64, copy=True)
    small = (out >= 1) & (out < privacy.suppress_cells_below)
    out[small] = 0
    return round_counts(out, privacy.round_to), int(np.count_nonzero(small))


def _chan(n_a: float, mean_a: float, m2_a: float, n_b: float, mean_b: float, m2_b: float):
    """Merge two (count, mean, sum of squared deviations) summaries (Chan, Golub and LeVeque 1979)."""
    n = n_a + n_b
    if n == 0:
        return 0.0, 0.0, 0.0
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n


def assess_rows(codes: np.ndarray, n_modalities, pi: np.ndarray, profiles: np.ndarray, pairs: np.ndarray,
                *, rng: RngLike = None, privacy: PrivacyConfig | None = None) -> dict:
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

    Returns
    -------
    dict
        ``n_rows``, ``n_observed``, ``observed``, ``replicated``, ``pair_n_observed``, ``pair_observed``,
        ``pair_replicated``, ``occupied``, ``lppd``, ``p_waic``, ``elpd``, ``elpd_m2``, ``n_suppressed``.
    """
    privacy = PrivacyConfig() if privacy is None else privacy
    codes = np.asarray(codes)
    pi = np.asarray(pi, dtype=np.float64)
    profiles = np.asarray(profiles, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    n_mod = tuple(int(k) for k in n_modalities)
    offsets = profile_offsets(n_mod)
    var_col = variable_of_column(n_mod)
    n, _ = codes.shape
    r_draws, c = pi.shape
    p = int(offsets[-1])
    rep_ss, occ_ss = as_seed_sequence(rng).spawn(2)
    rep_gen, occ_gen = np.random.default_rng(rep_ss), np.random.default_rng(occ_ss)

    cols, where = np.unique(pairs.ravel(), return_inverse=True)
    where = where.reshape(-1, 2)
    # cumulative profiles within each variable block, the last column of each block pushed above 1
    cum_prof = np.empty_like(profiles)
    for q in range(len(n_mod)):              # a loop over variables only
        block = slice(offsets[q], offsets[q + 1])
        cum_prof[:, :, block] = np.cumsum(profiles[:, :, block], axis=2)
    cum_prof[:, :, offsets[1:] - 1] = 2.0
    cum_pi = np.cumsum(pi, axis=1)

    n_observed = np.zeros(p)
    observed = np.zeros(p)
    pair_n = np.zeros(pairs.shape[0])
    pair_obs = np.zeros(pairs.shape[0])
    replicated = np.zeros((r_draws, p))
    pair_rep = np.zeros((r_draws, pairs.shape[0]))
    occupied = np.zeros((r_draws, c), dtype=np.int8)
    lppd = p_waic = 0.0
    n_e, mean_e, m2_e = 0.0, 0.0, 0.0
    for start in range(0, n, _ROWS):         # blocks of rows; everything inside is vectorised
        block_codes = codes[start:start + _ROWS]
        x = one_hot(block_codes, n_mod)
        seen = one_hot(np.where(block_codes == MISSING, MISSING, 0), n_mod)   # 1 on each variable's first
        seen = seen[:, offsets[var_col]]                                       # column -> every column
        n_observed += seen.sum(axis=0)
        observed += x.sum(axis=0)
        pair_n += _pair_counts(seen, pairs, cols, where)
        pair_obs += _pair_counts(x, pairs, cols, where)
        lp = np.empty((x.shape[0], r_draws))
        for r in range(r_draws):             # a loop over draws only
            ll = row_log_density(x, pi[r], profiles[r])
            lp[:, r] = logsumexp(ll, axis=1)
            cum = np.cumsum(np.exp(ll - lp[:, r][:, None]), axis=1)
            z = (cum < occ_gen.random(x.shape[0])[:, None] * cum[:, -1:]).sum(axis=1)
            occupied[r, np.unique(z)] = 1
            rep = one_hot(_replicate(block_codes, cum_pi[r], cum_prof[r], var_col, offsets, rep_gen), n_mod)
            replicated[r] += rep.sum(axis=0)
            pair_rep[r] += _pair_counts(rep, pairs, cols, where)
        lppd_i = logsumexp(lp, axis=1) - np.log(r_draws)
        v_i = lp.var(axis=1)                 # divisor R, as ArviZ's waic (docs/design.md §14.2)
        elpd_i = lppd_i - v_i
        lppd += float(lppd_i.sum())
        p_waic += float(v_i.sum())
        n_e, mean_e, m2_e = _chan(n_e, mean_e, m2_e, float(elpd_i.size), float(elpd_i.mean()),
                                  float(((elpd_i - elpd_i.mean()) ** 2).sum()))

    observed, n_sup = _disclosure(observed, privacy, n_mod)
    replicated, _ = _disclosure(replicated, privacy, n_mod)
    pair_obs, n_sup_pairs = _disclosure_cells(pair_obs, privacy)
    pair_rep, _ = _disclosure_cells(pair_rep, privacy)
    return {"n_rows": int(n),
            "n_observed": round_counts(n_observed.astype(np.int64), privacy.round_to),
            "observed": observed, "replicated": replicated,
            "pair_n_observed": round_counts(pair_n.astype(np.int64), privacy.round_to),
            "pair_observed": pair_obs, "pair_replicated": pair_rep, "occupied": occupied,
            "lppd": lppd, "p_waic": p_waic, "elpd": float(n_e * mean_e), "elpd_m2": float(m2_e),
            "n_suppressed": int(n_sup + n_sup_pairs)}
