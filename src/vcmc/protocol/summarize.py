"""The summarize family: the apply step in the silo, and ``SiloSummary``, the one object every strategy
receives from a silo (docs/design.md §4.3).

Label-consistent draws of (pi, p) for the silo's local clusters, point estimates, cluster sizes and (only
when the configuration allows it) the local contingency table, all after disclosure control. No field of
it has the silo's row count as a dimension.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.model import profile_offsets
from vcmc.protocol.message import Reply, Request
from vcmc.protocol.silo_config import SiloConfig


@dataclass(frozen=True)
class SiloSummary(Reply):
    """The frozen, typed, versioned summary a silo sends (docs/design.md §4.3).

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
    gaussian_draws : ndarray of shape (T, K, 2G), or None
        With Gaussian items (docs/design.md §17): draws of every cluster's G means, then G variances, on the
        standardised scale of the schema's location and scale; None without them.
    gaussian_estimate : ndarray of shape (K, 2G), or None
        Their posterior medians.
    gaussian_sums : ndarray of shape (K, 3G), or None
        Per cluster and item the observed rows, the sum and the sum of squares of the standardised values, after
        the release rule (docs/design.md §17.4); sent when the count table may be.
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
    gaussian_draws: np.ndarray | None = None
    gaussian_estimate: np.ndarray | None = None
    gaussian_sums: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "n_modalities", tuple(int(k) for k in self.n_modalities))
        for name in ("gaussian_draws", "gaussian_estimate", "gaussian_sums"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
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
        self._validate_gaussian(bad, t, k)

    @property
    def n_gaussian(self) -> int:
        """G, the Gaussian items (0 without them)."""
        return 0 if self.gaussian_draws is None else int(self.gaussian_draws.shape[2]) // 2

    def _validate_gaussian(self, bad, t: int, k: int) -> None:
        draws, est, sums = self.gaussian_draws, self.gaussian_estimate, self.gaussian_sums
        if draws is None:
            if est is not None or sums is not None:
                bad("Gaussian estimates or sums without Gaussian draws")
            return
        g = self.n_gaussian
        if draws.ndim != 3 or draws.shape[:2] != (t, k) or draws.shape[2] != 2 * g or g < 1:
            bad(f"gaussian_draws has shape {draws.shape}, expected ({t}, {k}, 2G)")
        if est is None or est.shape != (k, 2 * g):
            bad(f"gaussian_estimate must have shape ({k}, {2 * g})")
        if sums is not None and sums.shape != (k, 3 * g):
            bad(f"gaussian_sums has shape {sums.shape}, expected ({k}, {3 * g})")
        for name, arr in (("gaussian_draws", draws), ("gaussian_estimate", est), ("gaussian_sums", sums)):
            if arr is not None and not np.all(np.isfinite(arr)):
                bad(f"{name} contains NaN or infinite values")
        if np.any(draws[..., g:] <= 0) or np.any(est[:, g:] <= 0):
            bad("a Gaussian variance is not positive")

    def with_changes(self, **changes) -> SiloSummary:
        return dataclasses.replace(self, **changes)

    def check_reply(self, request, silo: str) -> None:
        self.validate()  # NaN, negative probabilities, simplex sums, shapes (names the silo)
        if self.silo != silo:
            self.refuse(request, silo, f"the summary says it comes from silo {self.silo!r}")
        if self.counts is not None and (not np.all(np.isfinite(self.counts)) or np.any(self.counts < 0)):
            self.refuse(request, silo, "counts contain NaN, infinite or negative values")
        if np.any(self.cluster_sizes <= 0):
            self.refuse(request, silo, "a local cluster sent has no member")


@dataclass(frozen=True)
class SummarizeRequest(Request, action="summarize", reply=SiloSummary, budget=4, without_summary=True):
    """Run the apply step and return a ``SiloSummary``.

    ``config`` is the typed ``SiloConfig`` (prior, sampler, post-processing, the disclosure limits the server
    asks for, which can only tighten the silo operator's own, and the aggregation strategy). The silo's
    random stream is ``SeedSequence(seed_entropy, spawn_key=spawn_key)``. Version 2: version 1 carried the
    configuration as JSON text (``config_json``), which a silo of this release refuses. A summarize request is
    retried after a failure, hence a budget of 4.
    """

    VERSION = 2
    CLOSED = True

    config: SiloConfig
    n_silos: int
    seed_entropy: int
    spawn_key: tuple[int, ...]

    def __post_init__(self):
        if not isinstance(self.config, SiloConfig):
            raise ConfigError(f"SummarizeRequest.config must be a SiloConfig (SiloConfig.from_fit_config); got "
                              f"{type(self.config).__name__}")

    @classmethod
    def from_arrays(cls, arrays):
        version = arrays.get("__version__")
        if arrays.get("__kind__") == cls.KIND and version is not None and int(version) != cls.VERSION:
            raise InconsistentSiloSummaries(
                f"'summarize_request' message has version {int(version)}; this vcmc understands version "
                f"{cls.VERSION} (the configuration as a typed SiloConfig, no longer as JSON text). Upgrade the "
                "server and the silos to the same vcmc release.")
        if "config.__kind__" not in arrays and arrays.get("__kind__") == cls.KIND:
            raise InconsistentSiloSummaries("the summarize request has no configuration ('config')")
        return super().from_arrays(arrays)
