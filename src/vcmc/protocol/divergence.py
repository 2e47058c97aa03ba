"""The divergence family: minimum-divergence matching's costs, computed on the silo's own rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class DivergenceReply(Reply):
    """Cost matrix (K_s, C + K_s): columns C.. are the 'open a new cluster' options (inf off-diagonal)."""

    KIND = "divergence_reply"
    VERSION = 1

    cost: np.ndarray

    def check_reply(self, request, silo: str) -> None:
        cost = np.asarray(self.cost, dtype=float)
        if cost.ndim != 2 or np.isnan(cost).any() or np.isneginf(cost).any():
            self.refuse(request, silo, "cost must be a 2-d array without NaN or -inf")
        c = int(np.asarray(request.reference_pi).shape[0])
        if cost.shape[1] != c + cost.shape[0]:
            self.refuse(request, silo, f"cost has shape {cost.shape}, expected (K, {c} + K)")


@dataclass(frozen=True)
class DivergenceRequest(Request, action="divergence", reply=DivergenceReply, budget=5000,
                        strategies=("min-divergence",)):
    """Minimum-divergence matching: cost of matching each local cluster to each reference cluster. The references
    are the server's (the global clusters found so far, silo after silo), so the operator must allow the
    ``min-divergence`` strategy (docs/federation.md)."""

    VERSION = 1

    reference_pi: np.ndarray          # (C,)
    reference_profiles: np.ndarray    # (C, P)
    rule: str                         # "penalised" | "augmented"
    penalty_multiplier: float = 1.0
