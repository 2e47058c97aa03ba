"""Build the ``SiloSummary`` a silo sends from its ``LocalPosterior`` (docs/design.md §4.3).

No disclosure control happens here: it is applied to the ``LocalPosterior`` before this call (minimum
cluster size, via ``vcmc.mcmc.postprocess.reallocate_small_clusters``) and to the counts after it.
The summary carries no row-level field: sizes, draws and estimates have the local clusters as their
dimension, never the silo's rows.
"""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import DataError, SchemaError
from vcmc.family import CATEGORICAL, GAUSSIAN
from vcmc.mcmc.posterior import LocalPosterior
from vcmc.protocol import SiloSummary


def build_summary(local: LocalPosterior, codes: np.ndarray, *, silo: str, schema_fingerprint: str,
                  n_modalities, include_counts: bool = True, summary_draws: int = 0,
                  values: np.ndarray | None = None) -> SiloSummary:
    """The summary of one silo: label-consistent draws, posterior medians, sizes and counts.

    Parameters
    ----------
    local : LocalPosterior
        Output of the apply step (after any disclosure-control reallocation).
    codes : ndarray of shape (n, Q), int
        The silo's codes, in the row order of ``local.partition``.
    silo : str
        Name of the silo (chosen by its operator).
    schema_fingerprint : str
        ``Schema.fingerprint()`` of the shared schema.
    n_modalities : sequence of int
        Modalities per variable of the shared schema (must match the local posterior's).
    include_counts : bool
        Put the local contingency table (clusters x modality columns) in the summary (strategy
        "contingency" needs it); False sends ``counts=None``.
    summary_draws : int
        Most draws sent (``PostprocessConfig.summary_draws``; 0: every kept draw), chosen by
        ``sent_draw_indices``.
    values : ndarray of shape (n, G), optional
        The standardised Gaussian items (``LocalPosterior.n_gaussian`` of them): their means and variances
        follow the profiles in the local posterior's parameter rows and go to the summary's Gaussian fields,
        their sums per cluster with the counts (docs/design.md §17).

    Returns
    -------
    SiloSummary
        Point estimates are per-coordinate posterior medians of the draws (docs/design.md §4.3);
        ``n_clusters_posterior`` is the posterior of the number of occupied components (both from every
        kept draw); the diagnostics of the local chains are copied, with ``n_draws_sent``.
    """
    n_mod = tuple(int(k) for k in n_modalities)
    if n_mod != tuple(local.n_modalities):
        raise SchemaError(f"silo {silo!r}: n_modalities {n_mod} differs from the local posterior's "
                          f"{tuple(local.n_modalities)}; the summary must use the shared schema")
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape != (local.partition.shape[0], len(n_mod)):
        raise DataError(f"silo {silo!r}: codes must have shape ({local.partition.shape[0]}, {len(n_mod)}) "
                        f"(rows of the local partition, variables of the schema); got {codes.shape}")
    counts = (CATEGORICAL.sufficient_statistics(codes, local.partition, local.n_clusters, n_mod) if include_counts
              else None)
    sent = local.thinned(summary_draws)
    diagnostics = {k: float(v) for k, v in local.diagnostics.items()}
    diagnostics["n_draws_sent"] = float(sent.pi_draws.shape[0])
    p = CATEGORICAL.n_columns(n_mod)
    gaussian = {}
    if local.n_gaussian:
        g = local.n_gaussian
        sums = (GAUSSIAN.sufficient_statistics(values, local.partition, local.n_clusters, g) if include_counts
                else None)
        gaussian = {"gaussian_draws": np.ascontiguousarray(sent.profile_draws[:, :, p:], dtype=np.float64),
                    "gaussian_estimate": np.median(local.profile_draws[:, :, p:], axis=0), "gaussian_sums": sums}
    return SiloSummary(
        silo=str(silo),
        n_rows=int(codes.shape[0]),
        n_modalities=n_mod,
        schema_fingerprint=str(schema_fingerprint),
        cluster_sizes=local.cluster_sizes.astype(np.int64),
        pi_draws=np.asarray(sent.pi_draws, dtype=np.float64),
        profile_draws=np.asarray(sent.profile_draws[:, :, :p] if local.n_gaussian else sent.profile_draws,
                                 dtype=np.float64),
        pi_estimate=np.median(local.pi_draws, axis=0),
        profile_estimate=np.median(local.profile_draws[:, :, :p] if local.n_gaussian else local.profile_draws,
                                   axis=0),
        n_clusters_posterior=local.n_clusters_posterior(),
        counts=counts,
        diagnostics=diagnostics,
        **gaussian,
    )
