"""Aggregation of the Gaussian items' blocks (docs/design.md §17.6): consensus weights.

For one (global cluster, item) block the parameters are a mean and a variance. The silos' matched draws of the
coordinates ``(mu, log sigma2)`` are combined draw by draw (the pairing of §8.1) with one weight per silo and
coordinate, proportional to the inverse of that silo's posterior variance of the coordinate (Scott et al. 2016,
§3.1): the product of Gaussian subposteriors is exactly that combination, and with fractionated priors the
product of the subposteriors is the full posterior. Each coordinate's weights are non-negative and sum to one, so
the aggregate stays a mean and a (positive) variance; a silo without the cluster is left out of its block, as a
structural zero is for the profiles.
"""

from __future__ import annotations

import numpy as np

#: Floor of a silo's posterior variance of a coordinate (a silo whose draws do not vary gets a large finite weight).
_VAR_FLOOR = 1e-12


def consensus_weights(matched: tuple[np.ndarray, ...], n_items: int) -> np.ndarray:
    """Per silo, global cluster and coordinate (S, C, 2G): the inverse posterior variances of ``(mu, log sigma2)``
    normalised over the silos holding the cluster (0 where absent)."""
    inv = []
    for draws in matched:
        coords = _coordinates(draws, n_items)
        var = coords.var(axis=0, ddof=1) if coords.shape[0] > 1 else np.ones(coords.shape[1:])
        inv.append(np.where(np.isnan(var), 0.0, 1.0 / np.maximum(np.nan_to_num(var), _VAR_FLOOR)))
    inv = np.stack(inv)
    total = inv.sum(axis=0, keepdims=True)
    return inv / np.where(total > 0, total, 1.0)


def aggregate_gaussian(matched: tuple[np.ndarray, ...], n_items: int, index: np.ndarray) -> np.ndarray:
    """The global draws (T, C, 2G) of the Gaussian items: draw ``t`` combines draw ``index[t, s]`` of every silo
    ``s`` with the consensus weights (module docstring)."""
    weights = consensus_weights(matched, n_items)
    index = np.asarray(index, dtype=np.int64)
    out = np.zeros((index.shape[0], *matched[0].shape[1:]))
    for s, draws in enumerate(matched):
        coords = np.nan_to_num(_coordinates(draws, n_items)[index[:, s]])
        out += weights[s][None] * coords
    out[:, :, n_items:] = np.exp(out[:, :, n_items:])
    return out


def _coordinates(draws: np.ndarray, n_items: int) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.concatenate([draws[..., :n_items], np.log(draws[..., n_items:])], axis=-1)
