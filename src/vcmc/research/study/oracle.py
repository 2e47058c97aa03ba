"""Oracle local posteriors: the paper's Appendix A setting, where local partitions are set to the truth.

Given a fixed partition of a silo's rows, the conditional posterior of the over-fitted latent class model
is conjugate (docs/design.md §2): the weights of the occupied clusters are ``Dir(n_l + alpha_local)`` and
each profile block is ``Dir(n^q_l + beta_local)``, with the fractionated local prior ``(a - 1)/S + 1``
(docs/design.md §4.1, paper section 4.2). Exact independent draws replace the Gibbs chain, so matching
can be studied separately from local estimation error (docs/design.md §5.3.1, Appendix A).
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy.special import gammaln

from vcmc._rng import as_generator
from vcmc.config import PriorConfig
from vcmc.data.codes import check_codes
from vcmc.dirichlet import sample_dirichlet_blocks
from vcmc.exceptions import DataError
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.model import beta_per_column, fractionate, one_hot_counts, profile_offsets
from vcmc.protocol import SiloSummary

__all__ = ["oracle_local_posterior", "oracle_summary", "oracle_posterior_and_summary",
           "summary_from_local_posterior"]


def _schema_fingerprint(n_modalities) -> str:
    """Hash of the schema (modalities per variable).

    The data module may define a richer fingerprint (names, codings); this one only covers what the
    oracle knows, the modality counts.
    """
    text = ",".join(str(int(k)) for k in n_modalities)
    return hashlib.sha256(f"vcmc-schema:{text}".encode()).hexdigest()[:16]


def _check_inputs(codes, n_modalities, labels):
    codes = check_codes(codes, n_modalities)
    labels = np.asarray(labels)
    if labels.shape != (codes.shape[0],):
        raise DataError(f"labels must have one entry per row: expected shape ({codes.shape[0]},), "
                        f"got {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or np.any(labels < 0):
        raise DataError(f"labels must be non-negative integer cluster labels; got dtype {labels.dtype}")
    return codes, labels, tuple(int(k) for k in n_modalities)


def oracle_local_posterior(codes, n_modalities, labels, *, prior: PriorConfig, n_silos: int,
                           n_draws: int = 1000, rng=None) -> LocalPosterior:
    """Exact conjugate posterior draws of a silo's clusters given a fixed (true) partition.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, Q), int
        The silo's data, codes ``0..K^q - 1`` and ``-1`` for missing.
    n_modalities : sequence of int
        Modalities per variable.
    labels : ndarray of shape (n_rows,), int
        The fixed partition (e.g. the true labels). Local clusters are the label values present,
        renumbered ``0..K-1`` in increasing order of the label value.
    prior : PriorConfig
        Priors; fractionated with ``n_silos`` when ``prior.fractionate`` is on.
    n_silos : int
        S, the number of silos (for the fractionation ``(a - 1)/S + 1``).
    n_draws : int, default 1000
        Number of independent posterior draws T.
    rng : int, Generator or None

    Returns
    -------
    LocalPosterior
        ``pi_draws`` (T, K) from ``Dir(n_l + alpha_local)``, ``profile_draws`` (T, K, P) from
        ``Dir(n^q_l + beta_local)``, the renumbered partition and its one-hot membership; ``n_occupied``
        is K at every draw and ``log_posterior`` the log joint density of each draw with the partition.
    """
    codes, labels, n_mod = _check_inputs(codes, n_modalities, labels)
    if int(n_silos) < 1:
        raise DataError(f"n_silos must be >= 1; got {n_silos}")
    if int(n_draws) < 1:
        raise DataError(f"n_draws must be >= 1; got {n_draws}")
    gen = as_generator(rng)
    values, partition = np.unique(labels, return_inverse=True)
    k = int(values.size)
    sizes = np.bincount(partition, minlength=k)
    counts = one_hot_counts(codes, partition, k, n_mod)                      # (K, P)
    alpha_local = float(fractionate(prior.alpha, n_silos, prior.fractionate))
    beta_local = fractionate(beta_per_column(prior.beta, n_mod), n_silos, prior.fractionate)   # (P,)

    # weights: one Dirichlet block spanning the K occupied clusters
    pi_draws = sample_dirichlet_blocks((sizes + alpha_local)[None, :], (k,), int(n_draws), gen)[:, 0, :]
    post_beta = counts + beta_local[None, :]
    profile_draws = sample_dirichlet_blocks(post_beta, n_mod, int(n_draws), gen)

    # log joint density p(X, z, pi, p) at each draw (label invariant; used by diagnostics)
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi_draws)
        log_p = np.log(profile_draws)
    offsets = profile_offsets(n_mod)
    loglik = log_pi @ sizes + np.einsum("tkp,kp->t", np.where(counts > 0, log_p, 0.0), counts)
    log_prior_pi = gammaln(k * alpha_local) - k * gammaln(alpha_local) + (alpha_local - 1) * log_pi.sum(1)
    norm_beta = np.sum(gammaln(np.add.reduceat(beta_local, offsets[:-1])) -
                       np.add.reduceat(gammaln(beta_local), offsets[:-1]))
    log_prior_p = k * norm_beta + np.einsum("tkp,p->t", log_p, beta_local - 1.0)
    log_post = loglik + log_prior_pi + log_prior_p

    membership = np.zeros((codes.shape[0], k))
    membership[np.arange(codes.shape[0]), partition] = 1.0
    return LocalPosterior(
        partition=partition.astype(np.int64),
        membership=membership,
        pi_draws=pi_draws,
        profile_draws=profile_draws,
        n_occupied=np.full((1, int(n_draws)), k, dtype=np.int64),
        log_posterior=log_post[None, :],
        n_modalities=n_mod,
        n_components=max(int(prior.n_components), k),
        n_reallocated=0,
        diagnostics={},
    )


def summary_from_local_posterior(local: LocalPosterior, codes, *, silo: str,
                                 share_counts: bool = True) -> SiloSummary:
    """The ``SiloSummary`` of a local posterior, without disclosure control (oracle and tests only).

    Point estimates are per-coordinate posterior medians; the contingency table is that of the local
    partition. The general, disclosure-controlled builder lives elsewhere (``vcmc.silo``).
    """
    codes = np.asarray(codes)
    counts = one_hot_counts(codes, local.partition, local.n_clusters, local.n_modalities) if share_counts \
        else None
    return SiloSummary(
        silo=str(silo),
        n_rows=int(codes.shape[0]),
        n_modalities=local.n_modalities,
        schema_fingerprint=_schema_fingerprint(local.n_modalities),
        cluster_sizes=local.cluster_sizes.astype(np.int64),
        pi_draws=local.pi_draws,
        profile_draws=local.profile_draws,
        pi_estimate=np.median(local.pi_draws, axis=0),
        profile_estimate=np.median(local.profile_draws, axis=0),
        n_clusters_posterior=local.n_clusters_posterior(),
        counts=counts,
        diagnostics=dict(local.diagnostics),
    )


def oracle_posterior_and_summary(codes, n_modalities, labels, *, silo: str, prior: PriorConfig,
                                 n_silos: int, n_draws: int = 1000,
                                 rng=None) -> tuple[LocalPosterior, SiloSummary]:
    """Both the (in-silo) oracle ``LocalPosterior`` and the ``SiloSummary`` built from it."""
    local = oracle_local_posterior(codes, n_modalities, labels, prior=prior, n_silos=n_silos,
                                   n_draws=n_draws, rng=rng)
    return local, summary_from_local_posterior(local, codes, silo=silo)


def oracle_summary(codes, n_modalities, labels, *, silo: str, prior: PriorConfig, n_silos: int,
                   n_draws: int = 1000, rng=None) -> SiloSummary:
    """``SiloSummary`` of the oracle posterior (Appendix A setting): draws, medians, sizes and counts.

    See ``oracle_local_posterior`` for the parameters; ``silo`` is the silo's name.
    """
    return oracle_posterior_and_summary(codes, n_modalities, labels, silo=silo, prior=prior,
                                        n_silos=n_silos, n_draws=n_draws, rng=rng)[1]
