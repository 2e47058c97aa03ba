"""A scikit-learn style estimator over ``vcmc.fit`` (``fit``, ``predict``, ``predict_proba``).

``fit`` takes the silos (the data never need to be pooled); ``predict`` and ``predict_proba`` score new
rows, e.g. at a new site, under the global parameters (posterior means).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from vcmc.config import AggregationConfig, FitConfig, MatchingConfig, PriorConfig, SamplerConfig
from vcmc.exceptions import DataError, NotFittedError
from vcmc.model import log_likelihood_rows


class FederatedLatentClassModel:
    """Federated Bayesian latent class model fitted by Variational Consensus Monte Carlo.

    Parameters
    ----------
    n_components : int, default 15
        C+, components of the over-fitted mixture in each silo.
    alpha, beta : float, default 0.01 and 0.5
        Dirichlet concentrations of the weights and of the profiles.
    n_iter, burn_in, thin : int, default 50,000, 25,000 and 5
        Gibbs sampler run in each silo.
    matching : {"calibrated", "ball", "hungarian", "min-divergence"}, default "calibrated"
    strategy : {"contingency", "federated-gradient", "design"}, default "contingency"
    method : str, default "vcmc"
        Any method of ``vcmc.fit``.
    rng : int, Generator or None
    jobs : int, default 1

    Attributes
    ----------
    weights_ : ndarray of shape (n_clusters_,)
    profiles_ : ndarray of shape (n_clusters_, P)
        Flat profiles (see ``vcmc.model``).
    n_clusters_ : int
    result_ : GlobalResult
    schema_ : vcmc.data.Schema
    """

    def __init__(self, *, n_components: int = 15, alpha: float = 0.01, beta: float = 0.5,
                 n_iter: int = 50_000, burn_in: int = 25_000, thin: int = 5, matching: str = "calibrated",
                 strategy: str = "contingency", method: str = "vcmc", rng=None, jobs: int = 1):
        self.n_components = n_components
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.matching = matching
        self.strategy = strategy
        self.method = method
        self.rng = rng
        self.jobs = jobs

    def _config(self) -> FitConfig:
        return FitConfig(
            prior=PriorConfig(n_components=self.n_components, alpha=self.alpha, beta=self.beta),
            sampler=SamplerConfig(n_iter=self.n_iter, burn_in=self.burn_in, thin=self.thin),
            matching=MatchingConfig(method=self.matching),
            aggregation=AggregationConfig(strategy=self.strategy))

    def fit(self, silos, y=None):
        """Fit on a sequence of ``SiloData`` (or a ``SimulatedData``); returns self."""
        from vcmc.api import _as_silos, fit

        data = _as_silos(silos)
        self.result_ = fit(data, config=self._config(), method=self.method, rng=self.rng, jobs=self.jobs)
        self.schema_ = data[0].schema
        keep = self.result_.cluster_sizes > 0
        w = self.result_.weights[keep]
        self.weights_ = w / w.sum()
        self.profiles_ = self.result_.profiles[keep]
        self.n_clusters_ = int(keep.sum())
        self.labels_ = (None if self.result_.assignments is None else
                        [np.searchsorted(np.flatnonzero(keep), a) for a in self.result_.assignments])
        return self

    def _codes(self, x) -> np.ndarray:
        if not hasattr(self, "result_"):
            raise NotFittedError("This FederatedLatentClassModel is not fitted yet; call fit(silos) first.")
        if hasattr(x, "codes"):
            return x.codes
        if hasattr(x, "columns"):  # a pandas DataFrame of labels
            return self.schema_.encode(x, source="predict input")
        codes = np.asarray(x)
        q = len(self.schema_.n_modalities)
        if codes.ndim != 2 or codes.shape[1] != q:
            raise DataError(f"predict expects integer codes of shape (n_rows, {q}), got {codes.shape}.")
        return codes

    def predict_proba(self, x) -> np.ndarray:
        """Posterior membership probabilities of new rows, shape (n_rows, n_clusters_)."""
        codes = self._codes(x)
        logr = log_likelihood_rows(codes, self.weights_, self.profiles_, self.schema_.n_modalities)
        return np.exp(logr - logsumexp(logr, axis=1, keepdims=True))

    def predict(self, x) -> np.ndarray:
        """Most probable global cluster (0-based) of new rows."""
        return np.argmax(self.predict_proba(x), axis=1)
