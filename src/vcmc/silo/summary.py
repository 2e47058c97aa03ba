"""What a silo keeps (``LocalPosterior``) and what it sends (``SiloSummary``), method.md section 4.3.

``LocalPosterior`` holds the post-processed local chain and the local partition: it never leaves the silo.
``SiloSummary`` is the one object every strategy receives from a silo: label-consistent draws of (pi, p)
for its local clusters, point estimates, cluster sizes and (only when the configuration allows it) the
local contingency table, all after disclosure control. No field of it has the silo's row count as a
dimension.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from vcmc.exceptions import InconsistentSiloSummaries
from vcmc.messages import Message
from vcmc.model import profile_offsets


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


@dataclass(frozen=True)
class SiloSummary(Message):
    """The frozen, typed, versioned summary a silo sends (method.md section 4.3).

    Attributes
    ----------
    silo : str
        The silo's name (chosen by its operator; not data).
    n_rows : int
        Number of individuals in the silo.
    n_modalities : tuple of int
        Modalities per variable of the shared schema.
    schema_fingerprint : str
        Hash of the shared schema, so the server can refuse summaries built on another coding.
    cluster_sizes : ndarray of shape (K,), int
        Members of each local cluster sent (after disclosure control).
    pi_draws : ndarray of shape (T, K)
    profile_draws : ndarray of shape (T, K, P)
    pi_estimate : ndarray of shape (K,)
        Posterior medians of the weights.
    profile_estimate : ndarray of shape (K, P)
        Posterior medians of the profiles (per coordinate; used as matching coordinates).
    n_clusters_posterior : ndarray of shape (C+ + 1,)
        Posterior of the number of occupied components in the local chain.
    counts : ndarray of shape (K, P), int, or None
        Local contingency table (members of each cluster having each modality); None when withheld.
    n_withheld : int
        Local clusters merged or withheld by disclosure control (only the number is reported).
    counts_suppressed : int
        Contingency cells suppressed by disclosure control.
    diagnostics : dict of str to float
    """

    KIND = "silo_summary"
    VERSION = 1

    silo: str
    n_rows: int
    n_modalities: tuple[int, ...]
    schema_fingerprint: str
    cluster_sizes: np.ndarray
    pi_draws: np.ndarray
    profile_draws: np.ndarray
    pi_estimate: np.ndarray
    profile_estimate: np.ndarray
    n_clusters_posterior: np.ndarray
    counts: np.ndarray | None = None
    n_withheld: int = 0
    counts_suppressed: int = 0
    diagnostics: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "n_modalities", tuple(int(k) for k in self.n_modalities))
        for name in ("cluster_sizes", "pi_draws", "profile_draws", "pi_estimate", "profile_estimate",
                     "n_clusters_posterior"):
            object.__setattr__(self, name, np.asarray(getattr(self, name)))
        if self.counts is not None:
            object.__setattr__(self, "counts", np.asarray(self.counts))
        self.validate()

    @property
    def n_clusters(self) -> int:
        return int(self.cluster_sizes.shape[0])

    @property
    def n_draws(self) -> int:
        return int(self.pi_draws.shape[0])

    def validate(self) -> None:
        """Raise ``InconsistentSiloSummaries`` naming the silo if any field is malformed."""
        k = self.n_clusters
        p = int(profile_offsets(self.n_modalities)[-1])

        def bad(msg: str):
            raise InconsistentSiloSummaries(f"summary of silo {self.silo!r}: {msg}")

        if k < 1:
            bad("it has no local cluster")
        if self.pi_draws.ndim != 2 or self.pi_draws.shape[1] != k:
            bad(f"pi_draws has shape {self.pi_draws.shape}, expected (T, {k})")
        t = self.pi_draws.shape[0]
        if t < 1:
            bad("it has no posterior draw")
        if self.profile_draws.shape != (t, k, p):
            bad(f"profile_draws has shape {self.profile_draws.shape}, expected ({t}, {k}, {p})")
        if self.pi_estimate.shape != (k,) or self.profile_estimate.shape != (k, p):
            bad("point estimates do not match the number of local clusters")
        if self.counts is not None and self.counts.shape != (k, p):
            bad(f"counts has shape {self.counts.shape}, expected ({k}, {p})")
        for name in ("pi_draws", "profile_draws", "pi_estimate", "profile_estimate"):
            arr = getattr(self, name)
            if not np.all(np.isfinite(arr)):
                bad(f"{name} contains NaN or infinite values")
            if np.any(arr < 0):
                bad(f"{name} contains negative probabilities")
        if not np.allclose(self.pi_draws.sum(axis=1), 1.0, atol=1e-6):
            bad("pi_draws rows do not sum to 1")
        sums = np.add.reduceat(self.profile_draws, profile_offsets(self.n_modalities)[:-1], axis=2)
        if not np.allclose(sums, 1.0, atol=1e-6):
            bad("profile_draws variable blocks do not sum to 1")
        if np.any(self.cluster_sizes < 0) or int(self.cluster_sizes.sum()) > self.n_rows:
            bad("cluster sizes are negative or exceed the number of rows")

    def with_changes(self, **changes) -> SiloSummary:
        return dataclasses.replace(self, **changes)
