"""The categorical family: ``X^q | C = c ~ Categorical(p^q_{., c})`` with a Dirichlet prior (docs/design.md §2, §17).

``spec`` is the tuple of modalities ``K^q`` of the variables. Its parameters are the flat profile row of
``vcmc.model`` (``P = sum_q K^q`` columns, each variable's block on the simplex); its statistics the contingency
counts ``(K, P)``. The array helpers stay in ``vcmc.model``, ``vcmc.dirichlet`` and ``vcmc.closeness`` (where every
stage has always found them); this class is the one place that says they are the categorical family's.
"""

from __future__ import annotations

import numpy as np

from vcmc.closeness import posterior_moments
from vcmc.family.base import Family
from vcmc.model import (
    beta_per_column,
    fractionate,
    intrinsic_dimension,
    log_likelihood_rows,
    one_hot_counts,
    profile_offsets,
)


class CategoricalFamily(Family):
    """Categorical items (module docstring)."""

    name = "categorical"
    disclosure = ("the cluster-by-modality count table (when the strategy needs it) and profile draws; cells "
                  "suppressed, rounded and noised by the operator's rules, the draws then redrawn from the "
                  "protected table (docs/design.md §13)")
    served_by = {
        "allocation": "vcmc.mcmc.sampler.kernels_dense._gibbs_block",          # the dense path (§12.5)
        "allocation.sparse": "vcmc.mcmc.sampler.kernels_sparse._gibbs_block_sparse",
        "allocation.mixed": "vcmc.mcmc.sampler.kernels_mixed._gibbs_block_mixed",   # beside Gaussian items
        "parameters": "vcmc.mcmc.sampler.draws._draw_parameters",
        "relabel": "vcmc.mcmc.relabel.PivotRelabeller",
        "summary": "vcmc.silo.build_summary.build_summary",
        "release": "vcmc.disclosure.protect_counts",
        "matching": "vcmc.closeness.posterior_moments",
        "aggregation": "vcmc.aggregation.elbo",
        "rounds": "vcmc.mcmc.sampler.round_kernels",
        "memberships": "vcmc.rows.row_kernels",
        "replicates": "vcmc.rows.ppc.assess_rows",
        "waic": "vcmc.rows.ppc.assess_rows",
        "lca": "vcmc.rows.lca",
        "figure": "vcmc.report.figures.heatmap_figure",
    }

    def n_columns(self, spec) -> int:
        return int(profile_offsets(spec)[-1])

    def n_coordinates(self, spec) -> int:
        return intrinsic_dimension(spec)

    def log_likelihood_rows(self, data, params, spec) -> np.ndarray:
        c = np.asarray(params).shape[0]
        return log_likelihood_rows(data, np.full(c, 1.0), params, spec)

    def sufficient_statistics(self, data, labels, n_clusters, spec) -> np.ndarray:
        return one_hot_counts(data, labels, n_clusters, spec)

    def local_prior(self, prior, spec, n_silos: int) -> np.ndarray:
        """``beta`` per profile column, ``(beta - 1)/S + 1`` under fractionation (docs/design.md §4.1)."""
        beta = beta_per_column(prior.beta, spec)
        return np.asarray(fractionate(beta, int(n_silos), prior.fractionate), dtype=np.float64).copy()

    def posterior_draws(self, stats, local_prior, spec, n_draws, rng) -> np.ndarray:
        # imported here: numba is not on the import path of a message that draws nothing (a hello)
        from vcmc.dirichlet import sample_dirichlet_blocks

        return sample_dirichlet_blocks(np.asarray(stats) + np.asarray(local_prior)[None, :], spec, n_draws, rng)

    def moments(self, param_draws, spec) -> tuple[np.ndarray, np.ndarray]:
        return posterior_moments(param_draws, spec)


CATEGORICAL = CategoricalFamily()
