"""Simulated latent class data with known covariate and distal effects (tests and benchmarks/lca.py).

Classes depend on a numeric covariate ``age`` (standard normal) and a two-level covariate ``sex`` through a
multinomial logit with known log odds against class 1; each class has its own probabilities of 8 binary
items, of a binary outcome ``death`` and its own mean of a numeric outcome ``score`` (unit variance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from vcmc._rng import RngLike, as_generator

ITEMS = tuple(f"item{j + 1}" for j in range(8))
# log odds of classes 2 and 3 against class 1: intercept, age, sex=m
TRUE_BETA = np.array([[-0.2, 0.8, 0.5],
                      [-0.6, -0.7, 0.9]])
TRUE_DEATH = np.array([0.10, 0.40, 0.25])     # P(death = 1 | class)
TRUE_SCORE = np.array([0.0, 1.5, -1.0])       # mean of score | class
_PROFILES = np.array([[0.9, 0.9, 0.85, 0.9, 0.8, 0.85, 0.9, 0.8],
                      [0.1, 0.15, 0.1, 0.2, 0.85, 0.9, 0.8, 0.85],
                      [0.15, 0.1, 0.2, 0.1, 0.15, 0.1, 0.2, 0.15]])   # P(item = 1 | class)


@dataclass(frozen=True)
class LcaSimulation:
    frames: list[pd.DataFrame]     # one per silo: items, age, sex, death, score
    labels: list[np.ndarray]       # true class (0-based) of each row, per silo

    @property
    def pooled(self) -> pd.DataFrame:
        return pd.concat(self.frames, ignore_index=True)


def simulate_lca(n_per_silo=(300, 300, 300), *, missing: float = 0.0, rng: RngLike = None) -> LcaSimulation:
    """Silos of the design above; ``missing`` is the share of item cells and outcome cells left empty."""
    gen = as_generator(rng)
    frames, labels = [], []
    for n in n_per_silo:
        age = np.round(gen.standard_normal(n), 1)     # rounded: not one value per row (an identifier)
        sex = gen.choice(["f", "m"], size=n)
        z = np.column_stack([np.ones(n), age, (sex == "m").astype(float)])
        eta = np.hstack([np.zeros((n, 1)), z @ TRUE_BETA.T])
        p = np.exp(eta - eta.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        cls = (p.cumsum(axis=1) > gen.random(n)[:, None]).argmax(axis=1)
        items = (gen.random((n, len(ITEMS))) < _PROFILES[cls]).astype(float)
        death = (gen.random(n) < TRUE_DEATH[cls]).astype(float)
        score = np.round(TRUE_SCORE[cls] + gen.standard_normal(n), 1)
        if missing > 0:
            items[gen.random(items.shape) < missing] = np.nan
            death[gen.random(n) < missing] = np.nan
            score[gen.random(n) < missing] = np.nan
        df = pd.DataFrame(items, columns=list(ITEMS)).astype("Int64")
        df["age"] = age
        df["sex"] = sex
        df["death"] = pd.array(death, dtype="Float64").astype("Int64")
        df["score"] = score
        frames.append(df)
        labels.append(cls)
    return LcaSimulation(frames=frames, labels=labels)
