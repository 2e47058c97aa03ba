"""Split-merge moves of the rounds (docs/design.md §16, "Split-merge moves"): a Metropolis-Hastings move on
the allocation between two sweeps, which merges two copies of one cluster in one step instead of by drift.

Target: the collapsed posterior ``p(z | x)`` of the pooled model (weights and profiles integrated out), a
product over components of ``F(N_c, CT_c)`` (``component_log_marginal``), so a move between two components
needs only their summed counts. Composed with the blocked Gibbs sweeps (whose marginal kernel on ``z`` also
leaves ``p(z | x)`` invariant), the chain keeps the pooled posterior as its stationary law.

The proposals, with an auxiliary ``phi = (theta_a, theta_b, rho)`` that sets the rows' split probabilities
``P(a) = rho f_a(x) / (rho f_a(x) + (1 - rho) f_b(x))`` (each silo computes them on its own rows):

* merge (probability 1/2): an ordered pair ``(a, b)`` of occupied components, chosen with weight
  ``exp(-d_ab / PAIR_SCALE)`` (``d_ab`` the mean total variation distance between their posterior-mean
  profiles); the rows of b go to a. ``phi ~ g(. | z)``: ``theta_a``, ``theta_b`` from their Dirichlet
  posteriors given the current counts, ``rho ~ Beta(N_a + 1, N_b + 1)``;
* split (probability 1/2): an occupied a and an empty b, uniformly; ``phi ~ h(. | z)``: ``theta_a``,
  ``theta_b`` independently from a's Dirichlet posterior, ``rho ~ U(0, 1)``; every row of a goes to b with
  its probability ``1 - P(a)``, drawn inside its silo.

Each is the other's reverse, and ``phi`` enters as an auxiliary variable of the proposal (its density in the
forward direction, ``h`` or ``g``, against the reverse one): the acceptance ratio of a merge is

    F(merged) - F(a) - F(b) + log s(a, b | z') - log m(a, b | z) + log h(phi | z') - log g(phi | z) + log q,

with ``q`` the probability of re-drawing the current split from the merged component (``log q``: a sum over
rows that each silo returns), and a split's is its negative with the roles exchanged; detailed balance
holds for every ``phi``, hence for the marginal move (the standard argument for proposals with auxiliary
variables, e.g. Storvik 2011). Written by hand: no library provides split-merge moves for a model whose rows
sit in separate silos.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from vcmc.dirichlet import log_dirichlet_blocks

PAIR_SCALE = 0.02   # merge pair weight exp(-d / PAIR_SCALE): copies (d ~ 0.01) far more often than others (d ~ 0.1+)


def _block_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sums of ``values`` over each variable's block of columns (the last axis), one per variable: the
    blocks' loops of these formulas in one call (each move evaluates them a dozen times on 80+ variables)."""
    return np.add.reduceat(values, np.asarray(offsets[:-1], dtype=np.intp), axis=-1)


def component_log_marginal(n: float, ct: np.ndarray, *, alpha: float, beta_cols: np.ndarray,
                           offsets: np.ndarray) -> float:
    """``F(N_c, CT_c)``: one component's factor of the collapsed log joint (weights' and profiles' Dirichlet-
    multinomial terms; an empty component's is 0, so ``sum_c F`` equals ``rounds.blocked_gibbs.log_joint`` up
    to a constant of the allocation's size)."""
    ct = np.asarray(ct, dtype=np.float64)
    b_sum = _block_sums(beta_cols, offsets)
    return float(gammaln(alpha + n) - gammaln(alpha)
                 + np.sum(gammaln(b_sum) - gammaln(b_sum + _block_sums(ct, offsets)))
                 + np.sum(gammaln(beta_cols + ct) - gammaln(beta_cols)))


def log_dirichlet_density(log_theta: np.ndarray, conc: np.ndarray, offsets: np.ndarray) -> float:
    """Log density of the blocks of ``exp(log_theta)`` under ``Dir(conc)`` per block (w.r.t. the simplex's
    Lebesgue measure of each block's first K - 1 coordinates)."""
    conc = np.asarray(conc, dtype=np.float64)
    return float(np.sum(gammaln(_block_sums(conc, offsets))) - np.sum(gammaln(conc))
                 + np.sum((conc - 1.0) * log_theta))


def _log_beta_density(log_rho: float, log_1m: float, a: float, b: float) -> float:
    return float(gammaln(a + b) - gammaln(a) - gammaln(b) + (a - 1.0) * log_rho + (b - 1.0) * log_1m)


def log_merge_choice(cluster: np.ndarray, modality: np.ndarray, a: int, b: int, *, beta_cols: np.ndarray,
                     offsets: np.ndarray) -> float:
    """``log m(a, b | z)``: the probability that a merge proposal picks the ordered pair (a, b)."""
    occ = np.flatnonzero(np.asarray(cluster) > 0)
    w = _pair_weights(modality[occ], beta_cols, offsets)
    ia, ib = int(np.flatnonzero(occ == a)[0]), int(np.flatnonzero(occ == b)[0])
    return float(np.log(w[ia, ib]) - np.log(w.sum()))


def _pair_weights(ct: np.ndarray, beta_cols: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(K, K) weights ``exp(-d / PAIR_SCALE)`` of the ordered pairs of the given components (0 on the
    diagonal), ``d`` the mean over variables of the total variation distance of posterior-mean profiles."""
    mean = beta_cols[None, :] + np.asarray(ct, dtype=np.float64)
    n_var = len(offsets) - 1
    blk = mean / np.repeat(_block_sums(mean, offsets), np.diff(offsets), axis=1)
    d = 0.5 * np.abs(blk[:, None, :] - blk[None, :, :]).sum(axis=2)
    w = np.exp(-(d / n_var) / PAIR_SCALE)
    np.fill_diagonal(w, 0.0)
    return w


@dataclass(frozen=True)
class Proposal:
    """A split-merge proposal: what the silos are sent, and the server's part of its log acceptance ratio
    (``log_server``; a split's still lacks the terms of the proposed counts, ``split_log_ratio``)."""

    kind: str
    a: int
    b: int
    log_theta_a: np.ndarray
    log_theta_b: np.ndarray
    log_rho: float
    log_1m_rho: float
    log_server: float


def propose(cluster: np.ndarray, modality: np.ndarray, *, alpha: float, beta_cols: np.ndarray,
            offsets: np.ndarray, rng: np.random.Generator) -> Proposal | None:
    """A merge or a split (probability 1/2 each) of the current allocation's counts; None when the chosen
    kind has no candidate (fewer than two occupied components, or no empty one)."""
    cluster = np.asarray(cluster, dtype=np.float64)
    modality = np.asarray(modality, dtype=np.float64)
    occ = np.flatnonzero(cluster > 0)
    empty = np.flatnonzero(cluster == 0)
    n_comp = cluster.size
    if rng.random() < 0.5:
        if occ.size < 2:
            return None
        w = _pair_weights(modality[occ], beta_cols, offsets)
        flat = rng.choice(w.size, p=(w / w.sum()).ravel())
        a, b = int(occ[flat // occ.size]), int(occ[flat % occ.size])
        conc_a, conc_b = beta_cols + modality[a], beta_cols + modality[b]
        la = log_dirichlet_blocks(conc_a[None], offsets, rng)[0]
        lb = log_dirichlet_blocks(conc_b[None], offsets, rng)[0]
        rho = float(np.clip(rng.beta(cluster[a] + 1.0, cluster[b] + 1.0), 1e-300, 1.0 - 1e-16))
        lr, l1 = float(np.log(rho)), float(np.log1p(-rho))
        merged = modality[a] + modality[b]
        kw = dict(alpha=alpha, beta_cols=beta_cols, offsets=offsets)
        log_server = (component_log_marginal(cluster[a] + cluster[b], merged, **kw)
                      - component_log_marginal(cluster[a], modality[a], **kw)
                      - component_log_marginal(cluster[b], modality[b], **kw)
                      - np.log(occ.size - 1) - np.log(n_comp - occ.size + 1)            # log s(a, b | merged)
                      - np.log(w[flat // occ.size, flat % occ.size] / w.sum())         # log m(a, b | z)
                      + log_dirichlet_density(la, beta_cols + merged, offsets)          # log h(phi | merged)
                      + log_dirichlet_density(lb, beta_cols + merged, offsets)
                      - log_dirichlet_density(la, conc_a, offsets)                       # log g(phi | z)
                      - log_dirichlet_density(lb, conc_b, offsets)
                      - _log_beta_density(lr, l1, cluster[a] + 1.0, cluster[b] + 1.0))
        return Proposal("merge", a, b, la, lb, lr, l1, float(log_server))
    if occ.size < 1 or empty.size < 1:
        return None
    a = int(rng.choice(occ))
    b = int(rng.choice(empty))
    conc_a = beta_cols + modality[a]
    la = log_dirichlet_blocks(conc_a[None], offsets, rng)[0]
    lb = log_dirichlet_blocks(conc_a[None], offsets, rng)[0]
    rho = float(np.clip(rng.random(), 1e-300, 1.0 - 1e-16))
    lr, l1 = float(np.log(rho)), float(np.log1p(-rho))
    log_server = (np.log(occ.size) + np.log(empty.size)                                  # - log s(a, b | z)
                  - log_dirichlet_density(la, conc_a, offsets) - log_dirichlet_density(lb, conc_a, offsets))
    return Proposal("split", a, b, la, lb, lr, l1, float(log_server))


def split_log_ratio(prop: Proposal, cluster: np.ndarray, modality: np.ndarray, n_b: float, ct_b: np.ndarray,
                    *, alpha: float, beta_cols: np.ndarray, offsets: np.ndarray) -> tuple[float, np.ndarray,
                                                                                          np.ndarray]:
    """The split's log acceptance ratio without ``- log q``, given the rows the silos drew to b (``n_b``,
    ``ct_b`` summed); ``-inf`` when a or b would be empty (the reverse merge needs both occupied). Returns
    the ratio and the proposed state's counts."""
    a, b = prop.a, prop.b
    cluster = np.asarray(cluster, dtype=np.float64).copy()
    modality = np.asarray(modality, dtype=np.float64).copy()
    n_a_new = cluster[a] - n_b
    if n_b <= 0 or n_a_new <= 0:
        return -np.inf, cluster, modality
    kw = dict(alpha=alpha, beta_cols=beta_cols, offsets=offsets)
    before = component_log_marginal(cluster[a], modality[a], **kw)
    new_cluster, new_modality = cluster.copy(), modality.copy()
    new_cluster[a], new_cluster[b] = n_a_new, n_b
    new_modality[a], new_modality[b] = modality[a] - ct_b, ct_b
    ratio = (prop.log_server
             + component_log_marginal(n_a_new, new_modality[a], **kw) + component_log_marginal(n_b, ct_b, **kw)
             - before
             + log_merge_choice(new_cluster, new_modality, a, b, beta_cols=beta_cols, offsets=offsets)
             + log_dirichlet_density(prop.log_theta_a, beta_cols + new_modality[a], offsets)   # log g(phi | z')
             + log_dirichlet_density(prop.log_theta_b, beta_cols + ct_b, offsets)
             + _log_beta_density(prop.log_rho, prop.log_1m_rho, n_a_new + 1.0, n_b + 1.0))
    return float(ratio), new_cluster, new_modality
