"""The counts family: count tables at parameters the server chooses (the federated-gradient and design
strategies, docs/design.md §7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class CountsReply(Reply):
    """Summed counts over the silo's rows.

    Soft mode: cluster (M, C), modality (M, C, P) and log-likelihood (M,). Hard mode: cluster (C,),
    modality (C, P) and an empty log-likelihood of shape (0,) (undefined without parameters).
    """

    KIND = "counts_reply"
    VERSION = 1

    cluster: np.ndarray
    modality: np.ndarray
    loglik: np.ndarray

    def check_reply(self, request, silo: str) -> None:
        for name in ("cluster", "modality", "loglik"):
            if not np.all(np.isfinite(np.asarray(getattr(self, name), dtype=float))):
                self.refuse(request, silo, f"{name} contains NaN or infinite values")
        if np.any(np.asarray(self.cluster) < 0) or np.any(np.asarray(self.modality) < 0):
            self.refuse(request, silo, "counts are negative")
        if request.mode == "soft" and request.pi is not None:
            m, c = np.asarray(request.pi).shape
            p = np.asarray(request.profiles).shape[-1]
            if self.cluster.shape != (m, c) or self.modality.shape != (m, c, p) or self.loglik.shape != (m,):
                self.refuse(request, silo, f"shapes {self.cluster.shape}, {self.modality.shape}, {self.loglik.shape}; "
                            f"expected ({m}, {c}), ({m}, {c}, {p}), ({m},)")


@dataclass(frozen=True)
class CountsRequest(Request, action="counts", reply=CountsReply,
                    budget=5000, strategies=("federated-gradient", "design")):
    """Counts at parameters chosen by the server (federated-gradient strategy).

    mode "soft": E-step soft counts at each of the M aggregated parameter draws (objective (b)).
    mode "hard": counts of the propagated local partition under ``assignment`` (objective (a)), the
    same for every draw.
    """

    VERSION = 1

    mode: str                          # "soft" | "hard"
    pi: np.ndarray | None = None       # (M, C)
    profiles: np.ndarray | None = None  # (M, C, P)
    assignment: np.ndarray | None = None  # (K_s,) local -> global
    n_global: int = 0
