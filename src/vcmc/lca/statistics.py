"""Fit statistics of a latent class model with StepMix's definitions (docs/design.md §15.2).

With ``L`` the maximised log-likelihood, ``p`` the free parameters and ``n`` the rows:
``aic = -2L + 2p``, ``bic = -2L + p log n``, ``sabic = -2L + p log((n + 2) / 24)`` (Sclove 1987, the
reference StepMix's docstring cites and Mplus' definition; StepMix's code multiplies the argument by n),
``caic = -2L + p (log n + 1)``, ``entropy = -sum_i sum_k r_ik log r_ik`` (memberships clipped to
[1e-15, 1 - 1e-15]) and ``relative_entropy = 1 - entropy / (n log K)`` (undefined at K = 1). All of them
come from whole-silo sums: the log-likelihood, the entropy sum and the row count.
"""

from __future__ import annotations

import math

STATISTICS = ("log_likelihood", "n_parameters", "aic", "bic", "sabic", "caic", "entropy", "relative_entropy")


def fit_statistics(loglik: float, n_parameters: int, n_rows: int, entropy: float, k: int) -> dict[str, float]:
    """The comparison table's statistics of one fit (``relative_entropy`` is NaN at K = 1)."""
    n = float(n_rows)
    p = float(n_parameters)
    dev = -2.0 * float(loglik)
    return {
        "log_likelihood": float(loglik),
        "n_parameters": int(n_parameters),
        "aic": dev + 2.0 * p,
        "bic": dev + p * math.log(n),
        "sabic": dev + p * math.log((n + 2.0) / 24.0),
        "caic": dev + p * (math.log(n) + 1.0),
        "entropy": float(entropy),
        "relative_entropy": (1.0 - float(entropy) / (n * math.log(k))) if k > 1 else float("nan"),
    }
