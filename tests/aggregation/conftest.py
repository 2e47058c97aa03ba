"""Shared test data for the aggregation tests: silos with a known partition and exact conjugate draws.

Each silo's draws come from its fractionated conjugate posterior given the true (fixed) partition, so the
product of the silos' subposteriors is an exact Dirichlet (docs/design.md §11.3.2) and the matching is
the identity on the true labels. Built directly from arrays so these tests do not depend on the sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vcmc.config import PriorConfig
from vcmc.matching.types import MatchedDraws
from vcmc.model import beta_per_column, fractionate, one_hot_counts, profile_offsets
from vcmc.rows.counts import hard_counts, soft_counts


@dataclass
class Problem:
    matched: MatchedDraws
    codes: list
    labels: list
    true_profiles: np.ndarray
    prior: PriorConfig


def dirichlet_blocks(gen, conc: np.ndarray, n_modalities, n_draws: int) -> np.ndarray:
    """Draws (T, C, P) with each variable block Dirichlet(conc[c, block])."""
    g = gen.gamma(np.broadcast_to(conc, (n_draws, *conc.shape)))
    offsets = profile_offsets(n_modalities)
    tot = np.add.reduceat(g, offsets[:-1], axis=-1)
    return g / np.repeat(tot, np.asarray(n_modalities), axis=-1)


def make_problem(seed: int, *, n_rows=(200, 500, 1000, 2000), silo_weights=None,
                 n_modalities=(2, 2, 3, 3, 3), concentration: float = 0.5, n_draws: int = 1000,
                 prior: PriorConfig | None = None, missing_rate: float = 0.0) -> Problem:
    """Simulate silos of a latent class model and exact fractionated subposterior draws per silo."""
    gen = np.random.default_rng(seed)
    prior = prior or PriorConfig()
    s = len(n_rows)
    if silo_weights is None:
        silo_weights = np.full((s, 4), 0.25)
    silo_weights = np.asarray(silo_weights, dtype=float)
    c = silo_weights.shape[1]
    k = np.asarray(n_modalities)
    p = int(k.sum())
    true = dirichlet_blocks(gen, np.full((c, p), concentration), n_modalities, 1)[0]       # (C, P)
    offsets = profile_offsets(n_modalities)
    a_loc = float(fractionate(prior.alpha, s, prior.fractionate))
    b_loc = fractionate(beta_per_column(prior.beta, n_modalities), s, prior.fractionate)
    codes, labels, pis, profs = [], [], [], []
    present = silo_weights > 0
    sizes = np.zeros((s, c), dtype=np.int64)
    counts = np.zeros((s, c, p), dtype=np.int64)
    for i, n in enumerate(n_rows):
        lab = gen.choice(c, size=n, p=silo_weights[i] / silo_weights[i].sum())
        x = np.empty((n, k.size), dtype=np.int64)
        for q in range(k.size):
            probs = true[lab, offsets[q]:offsets[q + 1]]
            u = gen.random(n)[:, None]
            x[:, q] = np.minimum((u > np.cumsum(probs, axis=1)).sum(axis=1), k[q] - 1)
        if missing_rate > 0:
            x[gen.random(x.shape) < missing_rate] = -1
        n_c = np.bincount(lab, minlength=c)
        present[i] = n_c > 0
        cnt = one_hot_counts(x, lab, c, n_modalities)
        pres = present[i]
        pi = np.zeros((n_draws, c))
        g = gen.gamma(np.broadcast_to(n_c[pres] + a_loc, (n_draws, int(pres.sum()))))
        pi[:, pres] = g / g.sum(axis=1, keepdims=True)
        prof = dirichlet_blocks(gen, cnt + b_loc[None, :], n_modalities, n_draws)
        prof[:, ~pres, :] = np.repeat(1.0 / k, k)
        codes.append(x)
        labels.append(lab)
        pis.append(pi)
        profs.append(prof)
        sizes[i] = n_c
        counts[i] = cnt
    matched = MatchedDraws(pi=tuple(pis), profiles=tuple(profs), present=present, sizes=sizes, counts=counts,
                           n_rows=np.asarray(n_rows), n_modalities=tuple(int(v) for v in k),
                           silos=tuple(f"silo{i}" for i in range(s)))
    return Problem(matched=matched, codes=codes, labels=labels, true_profiles=true, prior=prior)


NESTED = np.array([[1 / 6] * 6, [0.2] * 5 + [0], [1 / 3] * 3 + [0] * 3, [0.5] * 2 + [0] * 4])


@pytest.fixture
def make():
    """The ``make_problem`` factory (pytest's importlib mode cannot import conftest as a module)."""
    return make_problem


@pytest.fixture
def nested():
    """Cluster probabilities per silo of the paper's heterogeneous nested design (Table 1)."""
    return NESTED.copy()


def counts_fn_for(pr: Problem, calls: list | None = None):
    """A federated round trip over the problem's silos: soft counts, or hard counts of the true labels."""
    m = pr.matched

    def fn(pi, prof):
        if calls is not None:
            calls.append(None if pi is None else pi.shape[0])
        if pi is None:
            outs = [hard_counts(x, m.n_modalities, lab, m.n_global)
                    for x, lab in zip(pr.codes, pr.labels, strict=True)]
            return sum(o[0] for o in outs)[None], sum(o[1] for o in outs)[None], np.zeros(1)
        outs = [soft_counts(x, m.n_modalities, pi, prof) for x in pr.codes]
        return tuple(sum(o[i] for o in outs) for i in range(3))

    return fn


@pytest.fixture
def counts_fn():
    """Factory ``counts_fn(problem, calls=None)`` of in-process federated round trips."""
    return counts_fn_for
