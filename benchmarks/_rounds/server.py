"""What the server decides from sums over silos: collapsed marginal likelihoods, split variables, merges.

Everything here takes count tables summed over silos (what secure aggregation would let a server see), never
a silo's rows. The collapsed log marginal likelihood of a component's counts is the Dirichlet-multinomial
one of the model (docs/design.md §2): profiles Dirichlet(beta) per variable, weights Dirichlet(alpha) over
C+ components; with expected (fractional) counts it is the usual plug-in approximation.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln


def log_ml_profiles(ct: np.ndarray, offsets: np.ndarray, beta: float) -> np.ndarray:
    """Per component: sum over variables of log DirMult(counts | beta). ct (C, P) -> (C,)."""
    ct = np.atleast_2d(ct)
    out = np.zeros(ct.shape[0])
    for q in range(offsets.size - 1):
        block = ct[:, offsets[q]:offsets[q + 1]]
        k = block.shape[1]
        out += (gammaln(k * beta) - gammaln(k * beta + block.sum(axis=1))
                + (gammaln(beta + block) - gammaln(beta)).sum(axis=1))
    return out


def log_ml_weights(nc: np.ndarray, alpha: float, n_components: int) -> float:
    """log p(z) of the occupied sizes under Dirichlet(alpha) weights over C+ components, with the number of
    ways to give K occupied clusters distinct labels among C+ (so that K and K + 1 compare fairly)."""
    nc = np.asarray(nc, dtype=np.float64)
    nc = nc[nc > 0]
    k = nc.size
    if k > n_components:
        return -np.inf
    return float(gammaln(n_components * alpha) - gammaln(n_components * alpha + nc.sum())
                 + (gammaln(alpha + nc) - gammaln(alpha)).sum()
                 + gammaln(n_components + 1) - gammaln(n_components - k + 1))


def log_joint(nc, ct, offsets, alpha, beta, n_components) -> float:
    """Collapsed log p(X, z) of a partition from its summed counts (the quantity full MCMC explores)."""
    keep = np.asarray(nc) > 0
    return float(log_ml_profiles(ct[keep], offsets, beta).sum() + log_ml_weights(nc[keep], alpha, n_components))


def merge_gain(nc, ct, a, b, offsets, alpha, beta, n_components) -> float:
    """log p(X, z with a and b merged) - log p(X, z): positive means the pooled counts prefer one cluster."""
    sep = log_joint(nc, ct, offsets, alpha, beta, n_components)
    nc2, ct2 = nc.copy(), ct.copy()
    nc2[a] += nc2[b]
    ct2[a] += ct2[b]
    nc2[b] = 0.0
    ct2[b] = 0.0
    return log_joint(nc2, ct2, offsets, alpha, beta, n_components) - sep


def greedy_merges(nc, ct, offsets, alpha, beta, n_components, min_gain: float = 0.0) -> list[tuple[int, int]]:
    """Merge the pair with the largest positive gain until none is left; returns the merges (kept, absorbed)."""
    nc, ct = nc.astype(np.float64).copy(), ct.astype(np.float64).copy()
    merges = []
    while True:
        live = np.flatnonzero(nc > 0)
        best, pair = min_gain, None
        for i, a in enumerate(live):
            for b in live[i + 1:]:
                g = merge_gain(nc, ct, a, b, offsets, alpha, beta, n_components)
                if g > best:
                    best, pair = g, (int(a), int(b))
        if pair is None:
            return merges
        a, b = pair
        nc[a] += nc[b]
        ct[a] += ct[b]
        nc[b] = 0.0
        ct[b] = 0.0
        merges.append(pair)


def pair_tables(x: np.ndarray, offsets: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per cluster the (P, P) table of co-occurring modalities (one-hot cross products): a silo's own
    second-order sums, which the server only ever sees summed over silos."""
    p_n = int(offsets[-1])
    onehot = np.zeros((x.shape[0], p_n))
    for q in range(x.shape[1]):
        ok = x[:, q] >= 0
        onehot[np.flatnonzero(ok), offsets[q] + x[ok, q]] = 1.0
    out = np.zeros((n_clusters, p_n, p_n))
    for k in range(n_clusters):
        rows = onehot[labels == k]
        out[k] = rows.T @ rows
    return out


def split_rule(pairs: np.ndarray, offsets: np.ndarray) -> tuple[int, np.ndarray]:
    """The variable with the largest within-cluster association with the others (sum over the other
    variables of the chi-square statistic minus its degrees of freedom, from the summed pairwise table of one
    cluster) and the split of its modalities (ordinal cut with the most balanced halves).

    Returns (variable, boolean mask over its modalities: True = first half); (-1, None) if nothing to split.
    """
    q_n = offsets.size - 1
    score = np.zeros(q_n)
    for q in range(q_n):
        for r in range(q_n):
            if r == q:
                continue
            t = pairs[offsets[q]:offsets[q + 1], offsets[r]:offsets[r + 1]]
            n = t.sum()
            if n <= 0:
                continue
            e = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
            ok = e > 0
            chi2 = ((t[ok] - e[ok]) ** 2 / e[ok]).sum()
            df = (np.count_nonzero(t.sum(axis=1)) - 1) * (np.count_nonzero(t.sum(axis=0)) - 1)
            score[q] += chi2 - df
    for q in np.argsort(-score):
        marg = np.diag(pairs)[offsets[q]:offsets[q + 1]]
        if np.count_nonzero(marg) < 2 or score[q] <= 0:
            continue
        cum = np.cumsum(marg) / marg.sum()
        cut = int(np.argmin(np.abs(cum[:-1] - 0.5)))
        mask = np.zeros(marg.size, dtype=bool)
        mask[:cut + 1] = True
        return int(q), mask
    return -1, None


def split_direction(pairs: np.ndarray, offsets: np.ndarray) -> np.ndarray | None:
    """The principal axis of one cluster's rows (leading eigenvector of the covariance of their one-hot
    codes, from the summed pairwise table alone): split-and-merge EM's split direction (Ueda et al. 2000),
    which a silo applies to its own rows (sign of the centred row along it) so that every silo splits the
    same way. None when the cluster has no rows."""
    n = np.diag(pairs)[offsets[0]:offsets[1]].sum()
    if n <= 1:
        return None
    # the mean of each modality over the rows observing the variable, and the covariance of observed cells
    diag = np.diag(pairs)
    obs = np.zeros_like(diag)
    for q in range(offsets.size - 1):
        obs[offsets[q]:offsets[q + 1]] = diag[offsets[q]:offsets[q + 1]].sum()
    mu = np.divide(diag, obs, out=np.zeros_like(diag), where=obs > 0)
    cov = pairs / max(n, 1.0) - np.outer(mu, mu)
    w, v = np.linalg.eigh((cov + cov.T) / 2)
    return v[:, -1] if w[-1] > 0 else None
