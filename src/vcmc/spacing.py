"""Evenly spaced draws: the one rule every part of the library uses to pick ``n_take`` of ``n_total`` draws
(the server's draws sent for the memberships and the assessment, a silo's draws thinned for its summary
and for the divergence rule, the estimator's draws for ``predict_proba``). A leaf module: the silo side
and the server side both import it."""

from __future__ import annotations

import numpy as np


def evenly_spaced(n_total: int, n_take: int) -> np.ndarray:
    """``n_take`` indices evenly spaced over ``0..n_total-1``, first and last included, rounded to the
    nearest index (all of them when there are fewer; at least one)."""
    return np.unique(np.linspace(0, n_total - 1, max(1, min(n_total, n_take))).round().astype(np.int64))
