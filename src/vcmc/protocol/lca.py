"""Messages of the maximum-likelihood latent class analysis (docs/design.md §15).

One round of each request carries one parameter point chosen by the server; every reply is a sum over the
silo's rows (per cluster, per cluster and modality, or per parameter), never a per-row quantity:

- ``LcaEStepRequest`` -> ``LcaEStepReply``: the E-step of federated EM at ``(pi, profiles)``: expected
  cluster counts, expected modality counts per cluster, the log-likelihood and the summed entropy of the
  rows' memberships (the fit statistics).
- ``LcaClassifyRequest`` -> ``LcaClassifyReply``: the expected counts of each (true class, modal class)
  pair, from which the server forms the classification-error matrix of the three-step corrections.
- ``LcaStructuralRequest`` -> ``LcaStructuralReply``: the bias-adjusted (ML) three-step log-likelihood of
  a covariate or distal-outcome model at the parameters ``params``, its score and Hessian summed over the
  silo's rows (Newton rounds, as DataSHIELD's ``ds.glm``), and the posterior-weighted moments of the
  outcomes (EM rounds of the distal model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vcmc.protocol.message import Reply, Request

LCA = ("lca",)
"""The strategy of the latent class analysis' requests: the operator allows it, and then they may come without
a summary (the analysis has none)."""

LCA_STRUCTURAL = ("lca-structural",)
"""The strategy of the three-step structural requests: their sums are taken at covariate coefficients (or
outcome parameters) and a classification-error matrix the server chooses, which can weight one person alone,
so the operator allows them apart from the measurement model's EM rounds (docs/federation.md)."""


@dataclass(frozen=True)
class LcaEStepReply(Reply):
    """Whole-silo sums at the requested point.

    ``cluster`` (K,): ``sum_i r_ik``; ``modality`` (K, P): ``sum_i r_ik 1[x_iq = m]`` (missing cells
    skipped); ``loglik``: ``sum_i log p(x_i)``; ``entropy``: ``-sum_i sum_k r_ik log r_ik`` (StepMix clips
    ``r`` to [1e-15, 1 - 1e-15]); ``n_rows``: rows of the silo; ``gaussian`` (K, 3G), with Gaussian items
    (docs/design.md §17): ``sum_i r_ik`` over the rows observing each item, ``sum_i r_ik x_ig`` and
    ``sum_i r_ik x_ig^2`` (standardised values; ``loglik`` is then in the data's own units).
    """

    KIND = "lca_estep_reply"
    VERSION = 1

    n_rows: int
    cluster: np.ndarray
    modality: np.ndarray
    loglik: float
    entropy: float
    gaussian: np.ndarray | None = None


@dataclass(frozen=True)
class LcaEStepRequest(Request, action="lca_estep", reply=LcaEStepReply,
                      budget=20000, strategies=LCA, without_summary=LCA):
    """E-step at one parameter point of a K-class latent class model."""

    VERSION = 1

    pi: np.ndarray          # (K,)
    profiles: np.ndarray    # (K, P)
    gaussian: np.ndarray | None = None    # (K, 2G): means, then variances of the Gaussian items (standardised)


@dataclass(frozen=True)
class LcaClassifyReply(Reply):
    """``cross`` (K, K): ``sum_i r_ic 1[modal class of row i = s]`` at ``[c, s]``."""

    KIND = "lca_classify_reply"
    VERSION = 1

    cross: np.ndarray


@dataclass(frozen=True)
class LcaClassifyRequest(Request, action="lca_classify", reply=LcaClassifyReply,
                         budget=200, strategies=LCA, without_summary=LCA):
    """Expected cross-classification of true and modal classes at the fitted measurement model."""

    VERSION = 1

    pi: np.ndarray          # (K,)
    profiles: np.ndarray    # (K, P)


@dataclass(frozen=True)
class LcaStructuralReply(Reply):
    """Sums over the silo's rows used by the model: ``loglik``, ``score`` (D,), ``hessian`` (D, D).

    ``moments`` (K, M) are posterior-weighted sums of the distal outcomes (empty for covariates): per
    class the total posterior weight, then per outcome its observed weight and either the weight of each
    level (categorical) or the weighted sum and sum of squares (numeric). ``n_rows``: rows used.
    """

    KIND = "lca_structural_reply"
    VERSION = 1

    n_rows: int
    loglik: float
    score: np.ndarray
    hessian: np.ndarray
    moments: np.ndarray


@dataclass(frozen=True)
class LcaStructuralRequest(Request, action="lca_structural", reply=LcaStructuralReply,
                           budget=20000, strategies=LCA_STRUCTURAL, without_summary=LCA_STRUCTURAL):
    """The ML-corrected three-step model of covariates or distal outcomes at ``params``.

    ``model`` is ``"covariate"`` or ``"distal"``; ``spec_json`` names the silo's columns and their coding
    (``vcmc.rows.lca.AuxiliarySpec``: column names, kinds and level labels, the same for every silo);
    ``(pi, profiles)`` is the fitted measurement model (the silo recomputes each row's modal class with
    it); ``log_error`` (K, K) the log classification-error matrix ``log P(modal = s | class = c)``.
    """

    VERSION = 1

    model: str
    spec_json: str
    pi: np.ndarray
    profiles: np.ndarray
    log_error: np.ndarray
    params: np.ndarray
