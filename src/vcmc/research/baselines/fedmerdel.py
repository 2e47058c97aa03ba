"""FedMerDel with greedy global merge (Rao, Crowe, Marshall, Richardson, Kirk 2025), our implementation.

docs/design.md §11.1. Each silo fits the over-fitted categorical mixture (VICatMix model, section 1.1)
by mean-field variational inference (CAVI, section 1.2) with local merge and delete moves (section 1.4);
it then sends, for each of its non-empty clusters, the variational Dirichlet parameters ``alpha*_k``
(a soft size) and ``eps*_k`` (a soft contingency table) (section 1.6). The server greedily merges
clusters of different silos while the pooled ELBO increases (section 1.7) and returns the map (silo,
local cluster) -> global cluster; each silo relabels its rows with it. One shot: one message each way.

Model (flat profile layout of ``vcmc.model``, P = sum_q K^q columns):
``pi ~ Dir(alpha, ..., alpha)`` over ``K_init`` components, ``phi_{k,q} ~ Dir(eps_q)`` with
``eps_{q,l} = 1 / K^q`` by default (total mass 1 per variable; not the seed's beta = 1/2, which can be
passed as ``epsilon=0.5``), ``x_{n,q} | z_n = k ~ Cat(phi_{k,q})``; missing values drop out of the
likelihood. Clusters removed by moves stay in the prior with ``q(pi_k)`` equal to it (the "K_init"
convention, section 1.5), so local and global objectives are the same function.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy import special, stats

from vcmc._rng import as_seed_sequence, root_entropy
from vcmc.exceptions import ConfigError, ConvergenceWarning
from vcmc.model import MISSING, profile_offsets, variable_of_column
from vcmc.protocol import Message
from vcmc.research.baselines.fed_kmodes import check_positive_int, check_silos, kmodes_iterations
from vcmc.results import GlobalResult

NAME = "fedmerdel"


# --------------------------------------------------------------------------------------------------
# Model pieces: prior, expectations, CAVI steps, ELBO.
# --------------------------------------------------------------------------------------------------


def epsilon_columns(epsilon, n_modalities) -> np.ndarray:
    """Prior ``eps`` per profile column, shape (P,): ``1/K^q`` when ``epsilon`` is None (VICatMix)."""
    k = np.asarray(n_modalities, dtype=np.int64)
    if epsilon is None:
        return np.repeat(1.0 / k, k)
    e = np.broadcast_to(np.asarray(epsilon, dtype=np.float64), (k.size,))
    return np.repeat(e, k)


def one_hot(codes: np.ndarray, n_modalities) -> np.ndarray:
    """Row-level one-hot matrix (n, P), float; a missing value leaves its variable's block at zero."""
    offsets = profile_offsets(n_modalities)
    n, nq = codes.shape
    out = np.zeros((n, int(offsets[-1])))
    rows, cols = np.nonzero(codes != MISSING)
    out[rows, offsets[cols] + codes[rows, cols]] = 1.0
    return out


@functools.lru_cache(maxsize=64)
def _layout_cached(mods: tuple[int, ...]):
    return profile_offsets(mods), variable_of_column(mods)


def _layout(n_modalities):
    """(offsets, variable of each column), cached: these are needed in every CAVI sweep."""
    return _layout_cached(tuple(int(k) for k in n_modalities))


def _block_sums(a: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum of each variable's block, shape (..., Q)."""
    return np.add.reduceat(a, offsets[:-1], axis=-1)


def expectations(alpha_star, eps_star, alpha: float, k_init: int, n_modalities):
    """``E[log pi_k]`` (K,) and ``E[log phi_{k,p}]`` (K, P) under q (section 1.2 with the K_init rule).

    ``E[log pi_k] = psi(alpha*_k) - psi(sum_active alpha* + (K_init - K) alpha)``: removed components
    keep their prior ``alpha`` in the normaliser (section 1.5).
    """
    offsets, col_var = _layout(n_modalities)
    total = alpha_star.sum() + (k_init - alpha_star.size) * alpha
    el_pi = special.digamma(alpha_star) - special.digamma(total)
    el_phi = special.digamma(eps_star) - special.digamma(_block_sums(eps_star, offsets))[:, col_var]
    return el_pi, el_phi


def e_step(onehot, alpha_star, eps_star, alpha, k_init, n_modalities) -> np.ndarray:
    """Responsibilities ``r`` (n, K): ``r_nk ∝ exp(E log pi_k + sum_q E log phi_{k,q,x_nq})``."""
    el_pi, el_phi = expectations(alpha_star, eps_star, alpha, k_init, n_modalities)
    r = onehot @ el_phi.T + el_pi
    # Normalise in place (a hand-written softmax: scipy's logsumexp costs more than the whole step).
    r -= r.max(axis=1, keepdims=True)
    np.exp(r, out=r)
    r /= r.sum(axis=1, keepdims=True)
    return r


def m_step(onehot, r, alpha: float, eps_cols: np.ndarray):
    """``alpha*_k = alpha + N_k`` and ``eps*_{k,p} = eps_p + S_{k,p}`` from soft counts (section 1.2)."""
    return alpha + r.sum(axis=0), eps_cols + r.T @ onehot


def _log_dirichlet_norm(a: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """``lnΓ(sum a) - sum lnΓ(a)`` over the last axis, or per variable block when ``offsets`` given."""
    if offsets is None:
        return special.gammaln(a.sum(axis=-1)) - special.gammaln(a).sum(axis=-1)
    return special.gammaln(_block_sums(a, offsets)) - _block_sums(special.gammaln(a), offsets)


def local_elbo(r, alpha_star, eps_star, alpha: float, eps_cols, k_init: int, n_modalities) -> float:
    """The ELBO of section 1.3 term by term (valid right after an M-step), entropy of q(Z) included.

    The K_init convention (section 1.5): q(pi) and p(pi) run over all ``k_init`` components, the
    removed ones at their prior value ``alpha``.
    """
    offsets, _ = _layout(n_modalities)
    el_pi, el_phi = expectations(alpha_star, eps_star, alpha, k_init, n_modalities)
    k_act = alpha_star.size
    total = alpha_star.sum() + (k_init - k_act) * alpha
    el_pi_zombie = special.digamma(alpha) - special.digamma(total)
    a_all = np.concatenate([alpha_star, np.full(k_init - k_act, alpha)])
    el_all = np.concatenate([el_pi, np.full(k_init - k_act, el_pi_zombie)])
    e_px = np.sum((eps_star - eps_cols) * el_phi)
    e_pz = np.sum((alpha_star - alpha) * el_pi)
    e_ppi = special.gammaln(k_init * alpha) - k_init * special.gammaln(alpha) + (alpha - 1) * el_all.sum()
    e_pphi = np.sum(_log_dirichlet_norm(np.broadcast_to(eps_cols, eps_star.shape), offsets)) + np.sum(
        (eps_cols - 1) * el_phi)
    e_qz = -np.sum(special.entr(r))
    e_qpi = _log_dirichlet_norm(a_all) + np.sum((a_all - 1) * el_all)
    e_qphi = np.sum(_log_dirichlet_norm(eps_star, offsets)) + np.sum((eps_star - 1) * el_phi)
    return float(e_px + e_pz + e_ppi + e_pphi - e_qz - e_qpi - e_qphi)


def global_elbo(alpha_star, eps_star, alpha: float, eps_cols, k_init: int, n_modalities) -> float:
    """The pooled ELBO without the entropy of q(Z) (section 1.7), in closed form.

    Substituting ``E log p(Z|pi) = sum (alpha* - alpha) E log pi`` and ``E log p(X|Z,phi) = sum (eps* -
    eps) E log phi`` into section 1.3, every ``E log`` term cancels and what is left is a ratio of
    Dirichlet normalisers (a soft-count marginal likelihood):
    ``lnΓ(K_init alpha) - lnΓ(sum_k alpha*_k + (K_init - K) alpha) + sum_k [lnΓ(alpha*_k) - lnΓ(alpha)]
    + sum_{k,q} [lnB-ratio of eps*_{k,q} over eps_q]``.
    ``local_elbo`` evaluates the same quantity term by term (the tests check the two agree).
    """
    offsets, _ = _layout(n_modalities)
    k_act = alpha_star.size
    total = alpha_star.sum() + (k_init - k_act) * alpha
    pi_part = (special.gammaln(k_init * alpha) - special.gammaln(total)
               + np.sum(special.gammaln(alpha_star) - special.gammaln(alpha)))
    prior_norm = _log_dirichlet_norm(eps_cols[None, :], offsets)  # (1, Q)
    phi_part = np.sum(prior_norm - _log_dirichlet_norm(eps_star, offsets))
    return float(pi_part + phi_part)


def merge_pair(alpha_star_1, eps_star_1, alpha_star_2, eps_star_2, alpha: float, eps_cols):
    """Parameters of two merged clusters: sizes and soft counts add, one copy of the prior kept."""
    return alpha_star_1 + alpha_star_2 - alpha, eps_star_1 + eps_star_2 - eps_cols


def _dirichlet_kl(a, b, offsets) -> np.ndarray:
    """``sum_q KL(Dir(a_q) || Dir(b_q))`` for broadcastable (..., P) arrays, shape (...)."""
    col_var = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    a0 = _block_sums(a, offsets)
    psi_diff = special.digamma(a) - special.digamma(a0)[..., col_var]
    return (_log_dirichlet_norm(a, offsets).sum(-1) - _log_dirichlet_norm(b, offsets).sum(-1)
            + np.sum((a - b) * psi_diff, axis=-1))


def _dirichlet_bhattacharyya(a, b, offsets) -> np.ndarray:
    """``sum_q`` Bhattacharyya distance between ``Dir(a_q)`` and ``Dir(b_q)``: ``-ln ∫ sqrt(f g)``."""
    # ∫ sqrt(Dir(a) Dir(b)) = B((a+b)/2) / sqrt(B(a) B(b)) with B the multivariate Beta function,
    # and ln B = -_log_dirichlet_norm.
    m = (a + b) / 2
    return np.sum(_log_dirichlet_norm(m, offsets) - 0.5 * _log_dirichlet_norm(a, offsets)
                  - 0.5 * _log_dirichlet_norm(b, offsets), axis=-1)


# --------------------------------------------------------------------------------------------------
# Silo side: CAVI with merge and delete moves. Only the summary leaves the silo.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MerDelSummary(Message):
    """What a silo sends: per non-empty local cluster its ``alpha*`` (K,) and ``eps*`` (K, P), and K_init.

    Nothing has the silo's row count as a dimension. A ``vcmc.protocol.message.Message``, so it travels through
    any transport with ``to_arrays``/``from_arrays``.
    """

    KIND: ClassVar[str] = "fedmerdel-summary"
    VERSION: ClassVar[int] = 1

    alpha_star: np.ndarray
    eps_star: np.ndarray
    k_init: int


@dataclass
class _LocalFit:
    """Row-level state kept inside the silo (responsibilities) with the local diagnostics."""

    r: np.ndarray
    alpha_star: np.ndarray
    eps_star: np.ndarray
    elbo: list[float] = field(default_factory=list)
    moves: dict = field(default_factory=lambda: {"merge_proposed": 0, "merge_accepted": 0,
                                                 "delete_proposed": 0, "delete_accepted": 0})
    converged: bool = False
    sent: np.ndarray | None = None  # indices of the clusters sent (non-empty under hard labels)


class _Cavi:
    """CAVI for one silo's rows: ``onehot`` never leaves this object."""

    def __init__(self, onehot, alpha, eps_cols, k_init, mods):
        self.x, self.alpha, self.eps, self.k_init, self.mods = onehot, alpha, eps_cols, k_init, mods
        self.offsets = profile_offsets(mods)

    def e(self, a, e, rows=None):
        x = self.x if rows is None else self.x[rows]
        return e_step(x, a, e, self.alpha, self.k_init, self.mods)

    def m(self, r, rows=None):
        x = self.x if rows is None else self.x[rows]
        return m_step(x, r, self.alpha, self.eps)

    def elbo(self, r, a, e):
        return local_elbo(r, a, e, self.alpha, self.eps, self.k_init, self.mods)

    def merge_move(self, fit: _LocalFit, rng, current: float) -> float:
        """One merge proposal (section 1.4): close pair by Dirichlet KL, M-E-M refine, greedy accept."""
        labels = np.argmax(fit.r, axis=1)
        nonempty = np.flatnonzero(np.bincount(labels, minlength=fit.alpha_star.size) > 0)
        if nonempty.size < 2:
            return current
        e = fit.eps_star[nonempty]
        kl = _dirichlet_kl(e[:, None, :], e[None, :, :], self.offsets)
        iu = np.triu_indices(nonempty.size, k=1)  # upper triangle only, as in the authors' code
        order = np.argsort(kl[iu], kind="stable")[:3]
        pick = order[int(rng.integers(order.size))]
        k1, k2 = nonempty[iu[0][pick]], nonempty[iu[1][pick]]
        fit.moves["merge_proposed"] += 1
        r = fit.r.copy()
        r[:, k1] += r[:, k2]
        r = np.delete(r, k2, axis=1)
        a, ee = self.m(r)
        r = self.e(a, ee)
        a, ee = self.m(r)
        new = self.elbo(r, a, ee)
        if new > current:  # strictly greedy, no tolerance (section 1.4)
            fit.r, fit.alpha_star, fit.eps_star = r, a, ee
            fit.moves["merge_accepted"] += 1
            return new
        return current

    def delete_move(self, fit: _LocalFit, rng, current: float) -> float:
        """One delete proposal (section 1.4): drop a small cluster, refit its rows, greedy accept."""
        k_act = fit.alpha_star.size
        if k_act < 2:
            return current
        labels = np.argmax(fit.r, axis=1)
        size = np.bincount(labels, minlength=k_act)
        cand = np.flatnonzero(size <= 0.05 * labels.size)
        if cand.size == 0:
            cand = np.argsort(size, kind="stable")[:3]
        k = int(cand[int(rng.integers(cand.size))])
        fit.moves["delete_proposed"] += 1
        a, ee = np.delete(fit.alpha_star, k), np.delete(fit.eps_star, k, axis=0)
        rows = labels != k
        if rows.any():
            r_sub = self.e(a, ee, rows)
            a, ee = self.m(r_sub, rows)
        r = self.e(a, ee)
        a, ee = self.m(r)
        new = self.elbo(r, a, ee)
        if new > current:
            fit.r, fit.alpha_star, fit.eps_star = r, a, ee
            fit.moves["delete_accepted"] += 1
            return new
        return current


def silo_fit(codes, n_modalities, *, k_init: int, alpha: float, eps_cols: np.ndarray, tol: float,
             max_iter: int, laps: int, rng, moves: bool = True) -> tuple[_LocalFit, MerDelSummary]:
    """Local MerDel on one silo (section 1.4); returns (state kept in the silo, summary sent).

    Initialisation: hard labels from k-modes with ``k_init`` random distinct rows as initial modes
    and 10 iterations (the authors use ``klaR::kmodes``), ``eps* = eps + hard counts``, ``alpha* =
    alpha``. Then: E-step, M-step, ELBO; stop after three successive ``|ΔELBO| < tol`` or ``max_iter``
    sweeps; every ``laps`` sweeps one merge then one delete proposal.
    """
    x = one_hot(codes, n_modalities)
    cavi = _Cavi(x, alpha, eps_cols, k_init, n_modalities)
    uniq = np.unique(codes, axis=0)
    k0 = min(k_init, uniq.shape[0])
    modes = uniq[np.sort(rng.choice(uniq.shape[0], size=k0, replace=False))]
    _, labels, _ = kmodes_iterations(codes, modes, 10, n_modalities)
    k_start = int(labels.max()) + 1
    eps_star = eps_cols + np.eye(k_start)[labels].T @ x
    alpha_star = np.full(k_start, alpha)
    fit = _LocalFit(r=np.eye(k_start)[labels], alpha_star=alpha_star, eps_star=eps_star)
    small = 0
    for it in range(1, max_iter + 1):
        fit.r = cavi.e(fit.alpha_star, fit.eps_star)
        fit.alpha_star, fit.eps_star = cavi.m(fit.r)
        cur = cavi.elbo(fit.r, fit.alpha_star, fit.eps_star)
        if fit.elbo and abs(cur - fit.elbo[-1]) < tol:
            small += 1
        else:
            small = 0
        fit.elbo.append(cur)
        if small >= 3:
            fit.converged = True
            break
        if moves and laps > 0 and it % laps == 0:
            cur = cavi.merge_move(fit, rng, cur)
            cur = cavi.delete_move(fit, rng, cur)
    labels = np.argmax(fit.r, axis=1)
    fit.sent = np.flatnonzero(np.bincount(labels, minlength=fit.alpha_star.size) > 0)
    summary = MerDelSummary(alpha_star=fit.alpha_star[fit.sent].copy(),
                            eps_star=fit.eps_star[fit.sent].copy(), k_init=k_init)
    return fit, summary


def silo_relabel(fit: _LocalFit, local_to_global: np.ndarray, n_global: int):
    """Each row's memberships of the global clusters, its label and the silo's counts (row-level: in the silo).

    A row's membership of global cluster ``g`` is its responsibility summed over the local clusters the
    server merged into ``g`` (the probability, under the silo's variational posterior ``q(z)``, that the row
    belongs to one of them), renormalised over the clusters the silo sent (a cluster left empty under hard
    labels was not sent and has no global cluster). The label is the most probable global cluster, so
    assignments.csv and memberships.csv agree (docs/design.md §11.1). Returns ``(labels, counts,
    memberships (n, n_global))``.
    """
    r = fit.r[:, fit.sent]
    memberships = np.zeros((r.shape[0], n_global))
    np.add.at(memberships.T, np.asarray(local_to_global, dtype=np.int64), r.T)
    memberships /= memberships.sum(axis=1, keepdims=True)
    labels = np.argmax(memberships, axis=1).astype(np.int64)
    return labels, np.bincount(labels, minlength=n_global), memberships


# --------------------------------------------------------------------------------------------------
# Server side: greedy global merge on the summaries only.
# --------------------------------------------------------------------------------------------------


def _rank_scores(ranking: str, ref, cands, offsets) -> np.ndarray:
    """Higher = try first. ``ref`` (P,), ``cands`` (m, P) are eps* rows."""
    if ranking == "first-category":
        # The authors' heuristic: Pearson correlation across variables of the first category's eps*.
        a, b = ref[offsets[:-1]], cands[:, offsets[:-1]]
        a = a - a.mean()
        b = b - b.mean(axis=1, keepdims=True)
        den = np.sqrt((a * a).sum() * (b * b).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = (b @ a) / den
        return np.where(np.isfinite(corr), corr, -np.inf)
    # "bhattacharyya": closest Dirichlet posteriors first, using every category (docs/design.md §11.1).
    return -_dirichlet_bhattacharyya(ref[None, :], cands, offsets)


def server_greedy_merge(summaries: Sequence[MerDelSummary], alpha: float, eps_cols, n_modalities,
                        *, ranking: str = "first-category"):
    """Greedy global merge (section 1.7): returns ``(local_to_global, alpha*, eps*, diagnostics)``.

    Silos are visited in order; each cluster ``j`` of silo ``i`` tries, for every later silo ``m``, its
    clusters by decreasing rank and absorbs the first whose merge raises the pooled ELBO (entropy
    omitted: constant under merges of different silos' clusters). A global cluster thus holds at most
    one local cluster per silo. ``local_to_global[s][k]`` is the global index of silo s's k-th sent cluster.
    """
    offsets = profile_offsets(n_modalities)
    k_init = int(sum(s.k_init for s in summaries))
    n_silos = len(summaries)
    # Slots: one per local cluster; merged clusters live in the earlier silo's slot.
    a = [s.alpha_star.astype(np.float64).copy() for s in summaries]
    e = [s.eps_star.astype(np.float64).copy() for s in summaries]
    owner = [[[(s, k)] for k in range(summaries[s].alpha_star.size)] for s in range(n_silos)]

    def pooled():
        return np.concatenate(a), np.concatenate(e, axis=0)

    cur = global_elbo(*pooled(), alpha, eps_cols, k_init, n_modalities)
    start = cur
    n_eval = n_acc = 0
    for i in range(n_silos - 1):
        for j in range(a[i].size):
            for m in range(i + 1, n_silos):
                if a[m].size == 0:
                    continue
                order = np.argsort(-_rank_scores(ranking, e[i][j], e[m], offsets), kind="stable")
                for k in order:
                    new_a, new_e = merge_pair(a[i][j], e[i][j], a[m][k], e[m][k], alpha, eps_cols)
                    trial_a = [x.copy() for x in a]
                    trial_e = [x.copy() for x in e]
                    trial_a[i][j], trial_e[i][j] = new_a, new_e
                    trial_a[m] = np.delete(trial_a[m], k)
                    trial_e[m] = np.delete(trial_e[m], k, axis=0)
                    new = global_elbo(np.concatenate(trial_a), np.concatenate(trial_e, axis=0), alpha,
                                      eps_cols, k_init, n_modalities)
                    n_eval += 1
                    if new > cur:
                        a, e, cur = trial_a, trial_e, new
                        owner[i][j] = owner[i][j] + owner[m][k]
                        del owner[m][k]
                        n_acc += 1
                        break
    local_to_global = [np.full(s.alpha_star.size, -1, dtype=np.int64) for s in summaries]
    g = 0
    for s in range(n_silos):
        for members in owner[s]:
            for ss, kk in members:
                local_to_global[ss][kk] = g
            g += 1
    alpha_g, eps_g = pooled()
    diag = {"elbo_before": start, "elbo_after": cur, "n_evaluations": n_eval, "n_merges": n_acc,
            "k_init_global": k_init}
    return local_to_global, alpha_g, eps_g, diag


def variational_estimates(alpha_star, eps_star, n_modalities, level: float = 0.95):
    """Point estimates and equal-tailed intervals from the variational posterior's marginals.

    Weights: the renormalised active part of ``q(pi)``, i.e. ``Dir(alpha*_active)`` (the exact law of
    the active components' weights renormalised to one), mean ``alpha*_c / sum alpha*`` and marginal
    ``Beta(alpha*_c, sum alpha* - alpha*_c)``. Profiles: ``Dir(eps*_{c,q})`` marginals
    ``Beta(eps*_{c,p}, sum_q-block eps* - eps*_{c,p})``.
    """
    offsets = profile_offsets(n_modalities)
    col_var = variable_of_column(n_modalities)
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    a0 = alpha_star.sum()
    weights = alpha_star / a0
    w_ci = np.stack([stats.beta.ppf(lo, alpha_star, a0 - alpha_star),
                     stats.beta.ppf(hi, alpha_star, a0 - alpha_star)], axis=-1)
    e0 = _block_sums(eps_star, offsets)[:, col_var]
    profiles = eps_star / e0
    p_ci = np.stack([stats.beta.ppf(lo, eps_star, e0 - eps_star),
                     stats.beta.ppf(hi, eps_star, e0 - eps_star)], axis=-1)
    return weights, profiles, w_ci, p_ci


# --------------------------------------------------------------------------------------------------
# The federated run.
# --------------------------------------------------------------------------------------------------


def fit_fedmerdel(silos: Sequence[np.ndarray], n_modalities, *, k_init: int = 15, alpha: float = 0.01,
                  epsilon=None, tol: float = 5e-6, max_iter: int = 1000, laps: int = 5,
                  ranking: str = "first-category", moves: bool = True, rng=None,
                  silo_names=None) -> GlobalResult:
    """FedMerDel with greedy global merge (docs/design.md §11.1), one shot.

    Parameters
    ----------
    silos : sequence of ndarray of shape (n_s, Q)
        Integer codes per silo, ``0..K^q - 1``, ``-1`` for missing.
    n_modalities : sequence of int
    k_init : int
        Components per silo at the start (default 15; the global K_init is the sum over silos).
    alpha : float
        Symmetric Dirichlet concentration of the weights (default 0.01).
    epsilon : float, sequence of float or None
        Dirichlet concentration of each profile entry per variable; None gives ``1/K^q`` (default, the
        authors' choice).
    tol, max_iter : float, int
        CAVI stops after three successive ELBO changes below ``tol`` or ``max_iter`` sweeps.
    laps : int
        CAVI sweeps between two move pairs (one merge and one delete proposal); 0 disables moves.
    ranking : {"first-category", "bhattacharyya"}
        Order in which the server tries a later silo's clusters: the authors' Pearson correlation of
        the first categories' ``eps*`` (default, the binary-data heuristic the seed used), or the
        Bhattacharyya distance between the Dirichlet posteriors over all categories.
    moves : bool
        Local merge and delete moves (default True).
    rng : int, Generator or None
        Root seed; one stream per silo (``SeedSequence.spawn``).
    silo_names : sequence of str, optional

    Returns
    -------
    GlobalResult
        ``method="fedmerdel"``; weights, profiles and their 95% intervals from the marginals of the
        variational posterior (see ``variational_estimates``); ``memberships``: each row's responsibilities
        summed over the local clusters merged into each global cluster, ``assignments`` the most probable
        (``silo_relabel``). ``diagnostics``: per silo the ELBO trace,
        convergence flag and move counts; the server's ELBO before and after merging.
    """
    t0 = time.perf_counter()
    owner = "fit_fedmerdel"
    codes, mods, names = check_silos(silos, n_modalities, silo_names, owner=owner)
    k_init = check_positive_int(k_init, "k_init", owner)
    max_iter = check_positive_int(max_iter, "max_iter", owner)
    laps = check_positive_int(laps, "laps", owner, minimum=0)
    if not (np.isfinite(alpha) and alpha > 0):
        raise ConfigError(f"The 'alpha' parameter of {owner} must be a float in (0, inf). Got {alpha!r} "
                          "instead.")
    if not (np.isfinite(tol) and tol > 0):
        raise ConfigError(f"The 'tol' parameter of {owner} must be a float in (0, inf). Got {tol!r} instead.")
    if ranking not in ("first-category", "bhattacharyya"):
        raise ConfigError(f"The 'ranking' parameter of {owner} must be one of 'first-category', "
                          f"'bhattacharyya'. Got {ranking!r} instead.")
    if epsilon is not None:
        e = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
        if e.size not in (1, len(mods)) or not np.all(np.isfinite(e) & (e > 0)):
            raise ConfigError(f"The 'epsilon' parameter of {owner} must be None, a positive float or one "
                              f"positive float per variable ({len(mods)}). Got {epsilon!r} instead.")
    eps_cols = epsilon_columns(epsilon, mods)
    seed = root_entropy(rng)
    rngs = [np.random.default_rng(s) for s in as_seed_sequence(rng).spawn(len(codes))]

    t = time.perf_counter()
    local_times, fits, summaries = [], [], []
    for x, r in zip(codes, rngs, strict=True):
        ts = time.perf_counter()
        fit, summary = silo_fit(x, mods, k_init=k_init, alpha=alpha, eps_cols=eps_cols, tol=tol,
                                max_iter=max_iter, laps=laps, rng=r, moves=moves)
        local_times.append(time.perf_counter() - ts)
        fits.append(fit)
        summaries.append(summary)
    t_local = time.perf_counter() - t
    for name, fit in zip(names, fits, strict=True):
        if not fit.converged:
            warnings.warn(f"fit_fedmerdel: CAVI in silo {name!r} stopped at max_iter={max_iter} before three "
                          f"successive ELBO changes below tol={tol}.", ConvergenceWarning, stacklevel=2)

    t = time.perf_counter()
    l2g, alpha_g, eps_g, server_diag = server_greedy_merge(summaries, alpha, eps_cols, mods, ranking=ranking)
    t_server = time.perf_counter() - t
    n_global = alpha_g.size

    t = time.perf_counter()
    relabelled = [silo_relabel(fit, m, n_global) for fit, m in zip(fits, l2g, strict=True)]
    t_relabel = time.perf_counter() - t
    counts = np.stack([c for _, c, _ in relabelled]).astype(np.int64)
    weights, profiles, w_ci, p_ci = variational_estimates(alpha_g, eps_g, mods)
    timings = {"local": t_local, "local_max": max(local_times), "server": t_server, "relabel": t_relabel}
    timings["total"] = time.perf_counter() - t0
    diagnostics = {
        "local": [{"elbo": np.asarray(f.elbo), "n_iter": len(f.elbo), "converged": f.converged,
                   "n_sent": int(f.sent.size), **f.moves} for f in fits],
        "server": server_diag,
        "local_to_global": [m.copy() for m in l2g],
        "alpha_star": alpha_g,
        "eps_star": eps_g,
        "weights_estimate": "renormalised active part of q(pi): alpha*_c / sum alpha*",
    }
    return GlobalResult(
        method=NAME, n_modalities=mods, silos=names, weights=weights, profiles=profiles,
        partition_counts=counts, weights_ci=w_ci, profiles_ci=p_ci,
        assignments=tuple(lab for lab, _, _ in relabelled),
        memberships=tuple(m for _, _, m in relabelled), timings=timings,
        config={"k_init": k_init, "alpha": alpha,
                "epsilon": "1/K^q" if epsilon is None else np.asarray(epsilon).tolist(),
                "tol": tol, "max_iter": max_iter, "laps": laps, "ranking": ranking, "moves": moves},
        seed=seed, diagnostics=diagnostics,
    )
