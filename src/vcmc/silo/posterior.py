"""What a silo keeps after its apply step: ``LocalPosterior`` (row-level; it never leaves the silo).

The summary it sends is ``vcmc.protocol.SiloSummary``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
    profile_draws : ndarray of shape (T, K, P)
        Label-consistent draws of the local clusters' profiles (each variable block sums to 1).
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

    @property
    def n_clusters(self) -> int:
        return int(self.pi_draws.shape[1])

    @property
    def cluster_sizes(self) -> np.ndarray:
        return np.bincount(self.partition, minlength=self.n_clusters)

    def n_clusters_posterior(self) -> np.ndarray:
        """Posterior probability of each number of occupied components 0..C+, shape (C+ + 1,)."""
        counts = np.bincount(self.n_occupied.ravel(), minlength=self.n_components + 1)
        return counts / counts.sum()
