"""What a silo keeps after its apply step: ``LocalPosterior`` (row-level; it never leaves the silo).

The summary it sends is ``vcmc.protocol.SiloSummary``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from vcmc.spacing import evenly_spaced


def sent_draw_indices(n_chains: int, n_kept: int, summary_draws: int) -> np.ndarray:
    """Indices, into chain-major concatenated draws of ``n_chains`` chains of ``n_kept`` draws each, of the
    draws a silo sends: all of them when ``summary_draws`` is 0 or at least their number; otherwise
    ``max(1, summary_draws // n_chains)`` per chain, evenly spaced over its kept window (first and last
    kept draw included), so every chain keeps the same length and chain j stays chain j for the server."""
    total = n_chains * n_kept
    if summary_draws <= 0 or summary_draws >= total:
        return np.arange(total)
    per_chain = min(n_kept, max(1, summary_draws // n_chains))
    within = evenly_spaced(n_kept, per_chain)
    return (np.arange(n_chains)[:, None] * n_kept + within[None, :]).ravel()


@dataclass(frozen=True)
class LocalPosterior:
    """Post-processed output of the apply step, kept inside the silo.

    Attributes
    ----------
    partition : ndarray of shape (n_rows,), int
        Local cluster ``0..K-1`` of every row (row order of the silo's file).
    membership : ndarray of shape (n_rows, K), float
        Posterior probability of each row belonging to each local cluster (after relabelling).
    pi_draws : ndarray of shape (T, K)
        Label-consistent draws of the local clusters' weights (rows sum to 1).
    profile_draws : ndarray of shape (T, K, P + 2G)
        Label-consistent draws of the local clusters' flat parameter rows: the profiles (each variable block sums
        to 1), then with Gaussian items their G means and G variances (standardised scale; docs/design.md §17.3).
    n_occupied : ndarray of shape (n_chains, n_kept), int
        Number of non-empty components at each kept iteration (label invariant).
    log_posterior : ndarray of shape (n_chains, n_kept)
        Log joint density at each kept iteration (label invariant).
    n_modalities : tuple of int
    n_components : int
        C+ of the sampler.
    n_reallocated : int
        Rows moved out of local clusters below the minimum size.
    diagnostics : dict of str to float
        R-hat and ESS of label-invariant quantities.
    n_gaussian : int
        G, the Gaussian items (0: a categorical model).
    """

    partition: np.ndarray
    membership: np.ndarray
    pi_draws: np.ndarray
    profile_draws: np.ndarray
    n_occupied: np.ndarray
    log_posterior: np.ndarray
    n_modalities: tuple[int, ...]
    n_components: int
    n_reallocated: int = 0
    diagnostics: dict[str, float] = field(default_factory=dict)
    n_gaussian: int = 0

    @property
    def n_clusters(self) -> int:
        return int(self.pi_draws.shape[1])

    @property
    def cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.partition, minlength=self.n_clusters)

    def thinned(self, summary_draws: int) -> LocalPosterior:
        """The same posterior restricted to the draws a silo sends (``sent_draw_indices``): what the silo
        keeps after its summary, so that a silo process holds 1,000 draws, not every kept one, while it
        answers the later requests (``PostprocessConfig.summary_draws``; 0 keeps every draw)."""
        n_chains, n_kept = self.n_occupied.shape
        idx = sent_draw_indices(int(n_chains), int(n_kept), int(summary_draws))
        if idx.size == self.pi_draws.shape[0]:
            return self
        per_chain = idx[: idx.size // n_chains]                        # the same positions in every chain
        return dataclasses.replace(
            self, pi_draws=np.ascontiguousarray(self.pi_draws[idx]),
            profile_draws=np.ascontiguousarray(self.profile_draws[idx]),
            n_occupied=np.ascontiguousarray(self.n_occupied[:, per_chain]),
            log_posterior=np.ascontiguousarray(self.log_posterior[:, per_chain]))

    def n_clusters_posterior(self) -> np.ndarray:
        """Posterior probability of each number of occupied components 0..C+, shape (C+ + 1,)."""
        counts = np.bincount(self.n_occupied.ravel(), minlength=self.n_components + 1)
        return counts / counts.sum()
