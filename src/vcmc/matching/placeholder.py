"""Matched draws with placeholders for absent clusters (docs/design.md §5.5, option "placeholder").

By default a global cluster absent from a silo is a structural zero (``build_matched_draws``). The option
maps it instead to an empty slot of the silo's over-fitted mixture: under the fractionated prior, an empty
component of ``Dir(n_1 + a, ..., n_K + a, a, ..., a)`` (C+ components, ``a = (alpha - 1)/S + 1``) has the
marginal weight ``Beta(a, n_s + (C+ - 1) a)`` and its profile blocks are draws of ``Dir(b)`` with the
fractionated ``b``. The silo then enters every block's weight simplex and the optimiser has to drive its
weight on such blocks towards 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from vcmc._rng import spawn_generators
from vcmc.config import PriorConfig
from vcmc.dirichlet import sample_dirichlet_blocks
from vcmc.matching.types import MatchedDraws, Matching, build_matched_draws
from vcmc.model import beta_per_column, fractionate
from vcmc.protocol import SiloSummary

__all__ = ["build_matched_draws_with_placeholders"]


def build_matched_draws_with_placeholders(summaries: Sequence[SiloSummary], matching: Matching, *,
                                          prior: PriorConfig | None = None, rng=None) -> MatchedDraws:
    """``MatchedDraws`` where absent clusters are empty over-fitted slots instead of structural zeros.

    Parameters
    ----------
    summaries : sequence of SiloSummary
    matching : Matching
    prior : PriorConfig, optional
        The prior of the local samplers (default ``PriorConfig()``), fractionated over the silos.
    rng : int, Generator or None
        One stream per silo is spawned from it.

    Returns
    -------
    MatchedDraws
        ``present`` is all True; in each draw the placeholder weights are drawn first and the weights of
        the silo's own clusters are scaled by ``1 - sum(placeholders)`` so that rows still sum to 1.
        ``sizes`` and ``counts`` of absent clusters stay 0.
    """
    prior = PriorConfig() if prior is None else prior
    base = build_matched_draws(summaries, matching)
    n_silos = len(summaries)
    a = float(fractionate(prior.alpha, n_silos, prior.fractionate))
    b = fractionate(beta_per_column(prior.beta, base.n_modalities), n_silos, prior.fractionate)
    gens = spawn_generators(rng, n_silos)
    pis, profs = [], []
    for s, (pi, prof, gen) in enumerate(zip(base.pi, base.profiles, gens, strict=True)):
        absent = np.nonzero(~base.present[s])[0]
        if absent.size == 0:
            pis.append(pi)
            profs.append(prof)
            continue
        t = pi.shape[0]
        c_plus = max(int(prior.n_components), summaries[s].n_clusters + absent.size)
        w = gen.beta(a, base.n_rows[s] + (c_plus - 1) * a, size=(t, absent.size))
        # several placeholders must leave room for the silo's own clusters: cap their total below 1
        total = w.sum(axis=1, keepdims=True)
        w = np.where(total >= 0.5, w * 0.5 / total, w)
        pi = pi * (1.0 - w.sum(axis=1, keepdims=True))
        pi[:, absent] = w
        prof = prof.copy()
        prof[:, absent, :] = sample_dirichlet_blocks(np.broadcast_to(b, (absent.size, b.size)),
                                                     base.n_modalities, t, gen)
        pis.append(pi)
        profs.append(prof)
    return dataclasses.replace(base, pi=tuple(pis), profiles=tuple(profs),
                               present=np.ones_like(base.present, dtype=bool))
