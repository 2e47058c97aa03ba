"""Simulated mixed data (categorical and Gaussian items) with known truth, for the Gaussian family's tests and
benchmarks (docs/design.md §17)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc._rng import RngLike, as_generator
from vcmc.data.schema import ContinuousVariable, Schema, SiloData, Variable


@dataclass(frozen=True)
class MixedTruth:
    """The truth of a simulated mixed dataset: labels, weights, profiles (K, P), means and sds (K, G) in the
    data's units."""

    labels: np.ndarray
    weights: np.ndarray
    profiles: np.ndarray
    means: np.ndarray
    sds: np.ndarray


def simulate_mixed(n_rows, weights, means, sds, *, n_modalities=(2, 3, 3, 2), concentration: float = 0.5,
                   missing: float = 0.0, rng: RngLike = None) -> tuple[list[SiloData], MixedTruth]:
    """Silos of rows from a latent class model with categorical and Gaussian items.

    Parameters
    ----------
    n_rows : sequence of int
        Rows of each silo.
    weights : array of shape (K,) or (S, K)
        Cluster weights, shared or one row per silo (heterogeneous silos).
    means, sds : arrays of shape (K, G)
        Each cluster's mean and standard deviation of every Gaussian item.
    n_modalities : sequence of int
        Categorical variables; each cluster's profile drawn from a symmetric Dirichlet(``concentration``).
    missing : float
        Share of cells (categorical and continuous) missing completely at random.
    rng : seed or Generator

    Returns
    -------
    silos : list of SiloData
        With a schema whose location and scale are 0 and 1 (the units are the simulation's).
    truth : MixedTruth
        Labels of all silos' rows concatenated.
    """
    gen = as_generator(rng)
    means, sds = np.asarray(means, dtype=float), np.asarray(sds, dtype=float)
    k, g = means.shape
    w = np.broadcast_to(np.asarray(weights, dtype=float), (len(n_rows), k))
    k_mod = np.asarray(n_modalities)
    profiles = [gen.dirichlet(np.full(kq, concentration), size=k) for kq in k_mod]          # (K, K^q) each
    schema = Schema(tuple(Variable(f"V{q + 1}", tuple(str(m + 1) for m in range(kq))) for q, kq in enumerate(k_mod)),
                    continuous=tuple(ContinuousVariable(f"X{j + 1}", 0.0, 1.0) for j in range(g)))
    silos, labels = [], []
    for s, n in enumerate(n_rows):
        z = gen.choice(k, size=int(n), p=w[s] / w[s].sum())
        codes = np.column_stack([np.minimum((gen.random(int(n))[:, None] > np.cumsum(p[z], axis=1)).sum(axis=1),
                                            p.shape[1] - 1) for p in profiles]).astype(np.int16)
        values = means[z] + sds[z] * gen.standard_normal((int(n), g))
        if missing:
            codes[gen.random(codes.shape) < missing] = -1
            values[gen.random(values.shape) < missing] = np.nan
        silos.append(SiloData(f"silo_{s + 1}", codes, schema, source=f"simulated silo_{s + 1}", values=values))
        labels.append(z)
    truth = MixedTruth(labels=np.concatenate(labels), weights=w[0] if np.ndim(weights) == 1 else w,
                       profiles=np.concatenate(profiles, axis=1), means=means, sds=sds)
    return silos, truth
