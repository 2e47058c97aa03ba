"""The assign family: the silo's rows labelled with the global clusters (labels and memberships stay in the
silo; cluster-level sums leave it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class AssignReply(Reply):
    """Cluster-level summaries of the silo's memberships (sums over its rows; nothing row-level).

    ``counts`` (C,): rows labelled with each cluster; ``expected`` (C,): the sum of the memberships (the
    expected cluster sizes); ``probability`` (C,): the sum, over the rows labelled with each cluster, of
    their membership of it (divided by ``counts`` it is the average posterior probability of assignment);
    ``entropy``: the sum over rows of the entropy of their memberships (nats). Memberships averaged over
    draws: ``n_draws`` averaged (0: none, the local posterior propagated), ``mc_error`` the largest Monte
    Carlo standard error of a membership they leave, ``mc_target`` the error asked for.
    """

    KIND = "assign_reply"
    VERSION = 3

    counts: np.ndarray
    expected: np.ndarray | None = None
    probability: np.ndarray | None = None
    entropy: float = 0.0
    n_draws: int = 0
    mc_error: float = 0.0
    mc_target: float = 0.0

    def check_reply(self, request, silo: str) -> None:
        for name in ("counts", "expected", "probability"):
            arr = getattr(self, name)
            if arr is None:
                continue
            arr = np.asarray(arr)
            if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
                self.refuse(request, silo, f"{name} must be a 1-d array of non-negative numbers")
            if isinstance(request, AssignRequest) and arr.shape[0] != int(request.n_global):
                self.refuse(request, silo, f"{name} has {arr.shape[0]} entries, expected n_global = {request.n_global}")
        if not (np.isfinite(self.entropy) and self.entropy >= 0):
            self.refuse(request, silo, "entropy must be a finite number >= 0")


@dataclass(frozen=True)
class AssignRequest(Request, action="assign", reply=AssignReply, budget=2):
    """Give the silo's rows their memberships of the global clusters; the silo keeps them (row-level).

    Without parameters the local posterior is propagated through ``assignment`` (a row's membership of a
    global cluster is its share of kept iterations in the local clusters mapped to it). With ``pi`` and
    ``profiles`` (draws of this silo's weights of the global clusters and of the global profiles) a row's
    membership is its allocation probability averaged over the draws. The label of a row is its most
    probable global cluster. The honest server sends one per run.
    """

    VERSION = 2

    assignment: np.ndarray             # (K_s,)
    n_global: int
    pi: np.ndarray | None = None       # (T, C) or (C,)
    profiles: np.ndarray | None = None  # (T, C, P) or (C, P)
    gaussian: np.ndarray | None = None  # (T, C, 2G): with Gaussian items, their announced draws (docs/design.md §17)
