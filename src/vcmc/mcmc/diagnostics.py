"""Convergence diagnostics of the local chains with ArviZ (docs/design.md §4.1.1).

R-hat on raw mixture labels is meaningless under label switching, so the diagnostics are computed on
label-invariant quantities (log posterior, number of occupied components) and on the relabelled weights
of the local clusters. R-hat is the rank-normalised split R-hat of Vehtari et al. (2021) as computed by
ArviZ; with a single chain it is computed on the chain's two halves treated as two chains (ArviZ's own
split then cuts each half again), so a one-chain run still gets a non-stationarity check.

Undefined values (a constant quantity, e.g. a number of occupied components that never moves, or too few
draws) are reported as NaN rather than raising.
"""

from __future__ import annotations

import warnings

import numpy as np

from vcmc.mcmc.posterior import LocalPosterior
from vcmc.model import profile_offsets

# ArviZ tail ESS: the 5% and 95% quantiles (ArviZ's documented default for method="tail").
_TAIL_PROB = (0.05, 0.95)
_MIN_DRAWS = 4


def _as_chains(x: np.ndarray) -> np.ndarray:
    """(chains, draws, ...) array with at least two chains: one chain is cut into its two halves."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] == 1:
        half = x.shape[1] // 2
        x = np.stack([x[0, :half], x[0, half:2 * half]])
    return x


def _az():
    # ArviZ takes seconds to import (xarray, scipy.stats); import it only when diagnostics are computed,
    # so worker processes that only run chains do not pay for it. ``arviz.rhat``/``arviz.ess`` are
    # ``arviz_stats``'s own functions (ArviZ >= 1.0 re-exports them): importing ``arviz_stats`` alone gives
    # the same numbers without ``arviz_plots`` and matplotlib, which a silo's summarize message (a fresh
    # Flower ClientApp process) would otherwise import for nothing (benchmarks/flower.py, clientapp_cost).
    import arviz_stats

    return arviz_stats


def _quiet(fn, *args, **kwargs):
    # Constant draws make ArviZ divide 0 by 0: NaN is the honest answer, not an exception.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(fn(*args, **kwargs), dtype=np.float64)


def rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat of (chains, draws, ...) draws (one chain: split into halves)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] < _MIN_DRAWS:
        return np.full(x.shape[2:], np.nan)
    return _quiet(_az().rhat, _as_chains(x), chain_axis=0, draw_axis=1)


def ess(x: np.ndarray, method: str = "bulk") -> np.ndarray:
    """Bulk or tail effective sample size of (chains, draws, ...) draws, summed over chains."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] < _MIN_DRAWS:
        return np.full(x.shape[2:], np.nan)
    if method == "tail":
        return _quiet(_az().ess, x, method="tail", prob=_TAIL_PROB, chain_axis=0, draw_axis=1)
    return _quiet(_az().ess, x, method=method, chain_axis=0, draw_axis=1)


def _nan_reduce(fn, values: np.ndarray) -> float:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or np.all(np.isnan(values)):
        return float("nan")
    return float(fn(values))


def chain_diagnostics(log_posterior: np.ndarray, n_occupied: np.ndarray,
                      pi_draws: np.ndarray | None = None) -> dict[str, float]:
    """R-hat and bulk/tail ESS of the label-invariant quantities and of relabelled weights.

    Parameters
    ----------
    log_posterior, n_occupied : ndarray of shape (n_chains, n_kept)
    pi_draws : ndarray of shape (n_chains, n_kept, K), optional
        Relabelled weights of the local clusters.

    Returns
    -------
    dict of str to float
        ``rhat_log_posterior``, ``ess_bulk_log_posterior``, ``ess_tail_log_posterior`` and the same for
        ``n_occupied``; with ``pi_draws``: ``rhat_pi_max`` (worst cluster), ``ess_bulk_pi_min``,
        ``ess_tail_pi_min``; plus ``n_chains`` and ``n_kept``.
    """
    out: dict[str, float] = {}
    lp = np.asarray(log_posterior, dtype=np.float64)
    out["n_chains"] = float(lp.shape[0])
    out["n_kept"] = float(lp.shape[1])
    for name, x in (("log_posterior", lp), ("n_occupied", np.asarray(n_occupied, dtype=np.float64))):
        out[f"rhat_{name}"] = float(rhat(x))
        out[f"ess_bulk_{name}"] = float(ess(x, "bulk"))
        out[f"ess_tail_{name}"] = float(ess(x, "tail"))
    if pi_draws is not None:
        pi = np.asarray(pi_draws, dtype=np.float64)
        out["rhat_pi_max"] = _nan_reduce(np.nanmax, rhat(pi))
        out["ess_bulk_pi_min"] = _nan_reduce(np.nanmin, ess(pi, "bulk"))
        out["ess_tail_pi_min"] = _nan_reduce(np.nanmin, ess(pi, "tail"))
    return out


def _per_chain(local: LocalPosterior, draws: np.ndarray) -> np.ndarray:
    """Reshape (T, ...) chain-major concatenated draws to (n_chains, n_kept, ...)."""
    n_chains, n_kept = local.n_occupied.shape
    return draws.reshape((n_chains, n_kept) + draws.shape[1:])


def local_diagnostics(local: LocalPosterior) -> dict[str, float]:
    """``chain_diagnostics`` of a ``LocalPosterior`` (its draws are chain-major concatenations)."""
    return chain_diagnostics(local.log_posterior, local.n_occupied, _per_chain(local, local.pi_draws))


def to_datatree(local: LocalPosterior, schema=None):
    """An ArviZ ``DataTree`` of a local posterior's draws (it holds no row-level data).

    Groups: ``posterior`` with ``pi`` (chain, draw, cluster) and ``profiles`` (chain, draw, cluster,
    column); ``sample_stats`` with ``lp`` (log posterior) and ``n_occupied`` (chain, draw).

    Parameters
    ----------
    local : LocalPosterior
    schema : vcmc.data.schema.Schema, optional
        Names the columns ``"variable=modality"``; default ``"q<index>=<code>"``.
    """
    offsets = profile_offsets(local.n_modalities)
    if schema is not None:
        columns = [f"{v.name}={m}" for v in schema.variables for m in v.modalities]
    else:
        columns = [f"q{q}={k}" for q in range(len(local.n_modalities)) for k in range(local.n_modalities[q])]
    if len(columns) != int(offsets[-1]):
        raise ValueError(f"schema has {len(columns)} modality columns, the local posterior has "
                         f"{int(offsets[-1])}")
    import arviz_base  # ``arviz.from_dict`` is ``arviz_base.from_dict``; no plotting needed here either

    return arviz_base.from_dict(
        {"posterior": {"pi": _per_chain(local, local.pi_draws),
                       "profiles": _per_chain(local, local.profile_draws)},
         "sample_stats": {"lp": np.asarray(local.log_posterior, dtype=np.float64),
                          "n_occupied": np.asarray(local.n_occupied)}},
        dims={"pi": ["cluster"], "profiles": ["cluster", "column"]},
        coords={"cluster": np.arange(local.n_clusters), "column": columns},
    )
