"""``GlobalResult``: what every method (VCMC, full MCMC, comparators) returns.

Point estimates are posterior means and intervals equal-tailed 95% of the aggregated draws, unless a
method gives its own (FedMerDel: marginals of its variational posterior; K-modes: none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vcmc.matching.types import Matching


@dataclass(frozen=True)
class GlobalResult:
    """Global clustering and parameter estimates.

    Attributes
    ----------
    method : str
        Registry name of the method ("vcmc", "full-mcmc", "consensus", "fed-kmodes", ...).
    n_modalities : tuple of int
    silos : tuple of str
    weights : ndarray of shape (C,)
        Point estimate of the global weights.
    profiles : ndarray of shape (C, P)
        Point estimate of the global profiles.
    partition_counts : ndarray of shape (S, C), int
        Members of each global cluster in each silo.
    weights_ci, profiles_ci : ndarray of shape (C, 2) and (C, P, 2), or None
        Equal-tailed 95% intervals (None when the method has none).
    pi_draws, profile_draws : ndarray of shape (T, C) and (T, C, P), or None
        Global posterior draws; with ``n_chains`` chains, concatenated chain-major (``T / n_chains`` each).
    assignments : tuple of ndarray, or None
        Global label of every row of every silo; only filled when the silos run in this process
        (otherwise each silo keeps its own rows' labels).
    memberships : tuple of ndarray of shape (n_s, C), or None
        Posterior probability of every row of every silo belonging to each global cluster (the label is
        the most probable); filled like ``assignments``.
    n_chains : int
        Chains in the global draws (``sampler.n_chains`` for VCMC and full MCMC; 1 otherwise).
    timings : dict of str to float
        Wall seconds per stage ("apply", "matching", "aggregation", "total", ...).
    config : dict
    seed : int or None
        Root seed of the run.
    diagnostics : dict
        Method-specific diagnostics (ELBO trace, optimised weights, local diagnostics, warnings).
    matching : Matching or None
    gaussian_draws : ndarray of shape (T, C, 2G), or None
        With Gaussian items: draws of every cluster's means, then variances, on the schema's standardised scale
        (``vcmc.data.continuous``; ``gaussian_summary`` gives them on the original scale).
    """

    method: str
    n_modalities: tuple[int, ...]
    silos: tuple[str, ...]
    weights: np.ndarray
    profiles: np.ndarray
    partition_counts: np.ndarray
    weights_ci: np.ndarray | None = None
    profiles_ci: np.ndarray | None = None
    pi_draws: np.ndarray | None = None
    profile_draws: np.ndarray | None = None
    assignments: tuple[np.ndarray, ...] | None = None
    memberships: tuple[np.ndarray, ...] | None = None
    n_chains: int = 1
    timings: dict[str, float] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    seed: int | None = None
    diagnostics: dict = field(default_factory=dict)
    matching: Matching | None = None
    gaussian_draws: np.ndarray | None = None

    @property
    def n_clusters(self) -> int:
        """Number of global clusters with at least one member."""
        return int(np.count_nonzero(self.partition_counts.sum(axis=0)))

    @property
    def cluster_sizes(self) -> np.ndarray:
        return self.partition_counts.sum(axis=0)

    @classmethod
    def from_draws(cls, *, pi_draws: np.ndarray, profile_draws: np.ndarray, **kwargs) -> GlobalResult:
        """Posterior means and equal-tailed 95% intervals from global draws."""
        w_ci = np.quantile(pi_draws, [0.025, 0.975], axis=0).T
        p_ci = np.moveaxis(np.quantile(profile_draws, [0.025, 0.975], axis=0), 0, -1)
        return cls(weights=pi_draws.mean(axis=0), profiles=profile_draws.mean(axis=0), weights_ci=w_ci,
                   profiles_ci=p_ci, pi_draws=pi_draws, profile_draws=profile_draws, **kwargs)
