"""The assess family: model assessment inside the silo under the global posterior (docs/design.md §14)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vcmc.protocol.message import Reply, Request


@dataclass(frozen=True)
class AssessReply(Reply):
    """Whole-silo aggregates of the assessment: sums over the silo's rows, nothing per row.

    Counts (after the silo's suppression and rounding, applied alike to observed and replicated counts):
    ``n_observed`` (P,) rows with the column's variable observed; ``observed`` (P,) rows with each
    modality; ``replicated`` (R, P) the same in replicated dataset r (same missing cells as the data);
    ``pair_n_observed``, ``pair_observed`` (E,) and ``pair_replicated`` (R, E) the same for rows with both
    modalities of each pair. ``occupied`` (R, C), 0/1: whether any row of the silo falls in each global
    cluster when allocations are sampled at draw r. WAIC sums over the silo's ``n_rows`` rows of
    ``lppd_i = log mean_r p(x_i | theta_r)`` (``lppd``), ``v_i = var_r log p(x_i | theta_r)``
    (``p_waic``) and ``elpd_i = lppd_i - v_i`` (``elpd``), with ``elpd_m2`` the sum of squared deviations of
    ``elpd_i`` from their silo mean (for the standard error). ``n_suppressed``: counts suppressed.
    ``weights`` (R, C): empty when the replicates were drawn at the request's weights; after the rounds, in the
    analyst's own session with labels under the silo's own weights, the silo's own weights of each draw, at
    which it replicated its rows (the server needs them for the checks' expected counts; docs/design.md §16).
    With Gaussian items (docs/design.md §17.7) every density is in the WAIC sums and the occupancy, and
    ``gaussian_observed`` (3, G) holds each item's observed rows, sum and sum of squares (standardised),
    ``gaussian_replicated`` (R, 3, G) the same in each replicated dataset.
    """

    KIND = "assess_reply"
    VERSION = 2

    n_rows: int
    n_observed: np.ndarray
    observed: np.ndarray
    replicated: np.ndarray
    pair_n_observed: np.ndarray
    pair_observed: np.ndarray
    pair_replicated: np.ndarray
    occupied: np.ndarray
    lppd: float
    p_waic: float
    elpd: float
    elpd_m2: float
    n_suppressed: int = 0
    weights: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    gaussian_observed: np.ndarray | None = None
    gaussian_replicated: np.ndarray | None = None

    def check_reply(self, request, silo: str) -> None:
        if isinstance(request, AssessRequest):
            r, c = np.asarray(request.pi).shape
            p = np.asarray(request.profiles).shape[-1]
            e = np.asarray(request.pairs).reshape(-1, 2).shape[0]
            shapes = {"n_observed": (p,), "observed": (p,), "replicated": (r, p), "pair_n_observed": (e,),
                      "pair_observed": (e,), "pair_replicated": (r, e), "occupied": (r, c)}
            for name, shape in shapes.items():
                if np.shape(getattr(self, name)) != shape:
                    self.refuse(request, silo, f"{name} has shape {np.shape(getattr(self, name))}, expected {shape}")
        for name in ("n_observed", "observed", "replicated", "pair_n_observed", "pair_observed",
                     "pair_replicated", "occupied"):
            arr = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                self.refuse(request, silo, f"{name} must hold finite non-negative counts")
        w = np.asarray(self.weights, dtype=float)
        if w.size and (w.ndim != 2 or w.shape[0] != np.shape(self.replicated)[0] or w.shape[1] !=
                       np.shape(self.occupied)[-1] or not np.all(np.isfinite(w)) or np.any(w < 0)
                       or not np.allclose(w.sum(axis=1), 1.0)):
            self.refuse(request, silo, "weights must be (R, C) probability vectors, one per replicated dataset")
        if not all(np.isfinite(v) for v in (self.lppd, self.p_waic, self.elpd, self.elpd_m2)):
            self.refuse(request, silo, "the WAIC sums must be finite")
        if self.n_rows < 1 or self.p_waic < 0 or self.elpd_m2 < 0:
            self.refuse(request, silo, "n_rows must be >= 1 and p_waic, elpd_m2 >= 0")


@dataclass(frozen=True)
class AssessRequest(Request, action="assess", reply=AssessReply, budget=1, without_summary=("lca",)):
    """Model assessment inside the silo under the global posterior (docs/design.md §14).

    ``pi`` holds draws of this silo's weights of the global clusters and ``profiles`` the global profile
    draws they were paired with (R draws: one replicated dataset each, and the draws of WAIC and of the
    number of clusters). ``pairs`` lists the flat profile columns ``(a, b)`` of the co-occurrence check,
    chosen by the server so that every silo checks the same pairs. The silo's random stream (replicated
    datasets, sampled allocations) is ``SeedSequence(seed_entropy, spawn_key=spawn_key)``. One per run (two
    would let their sums be differenced); it may come without a summary where the operator allows the
    latent class analysis (its WAIC round).
    """

    VERSION = 1

    pi: np.ndarray                     # (R, C)
    profiles: np.ndarray               # (R, C, P)
    pairs: np.ndarray                  # (E, 2) int
    seed_entropy: int
    spawn_key: tuple[int, ...]
    gaussian: np.ndarray | None = None  # (R, C, 2G): the Gaussian items' announced draws (docs/design.md §17.7)
