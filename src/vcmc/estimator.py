"""``FederatedLatentClassModel``: a scikit-learn clusterer over ``vcmc.fit``.

``fit`` takes the silos (a list of data frames, arrays of labels or ``SiloData``; the rows never need to be
pooled) and learns the global clusters; ``predict``, ``predict_proba`` and ``score`` handle new rows, for
example those of a new site, under the global posterior. It follows scikit-learn's estimator rules:
parameters only in ``__init__`` (so ``sklearn.base.clone`` works), validation through scikit-learn's
parameter constraints when ``fit`` is called, learned attributes with a trailing underscore,
``check_is_fitted``, ``n_features_in_`` and ``feature_names_in_``.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from vcmc.config import FitConfig
from vcmc.config.schema import option, param_constraint
from vcmc.exceptions import DataError
from vcmc.methods import names as method_names
from vcmc.model import log_likelihood_rows
from vcmc.spacing import evenly_spaced

__all__ = ["FederatedLatentClassModel"]

_METHODS = method_names(estimator=True)     # the one registry's (vcmc.methods)

#: The estimator's parameters that are ``FitConfig`` options, by run-config key: their defaults, types and
#: allowed values come from the option table (``vcmc.config.schema``), their ranges are checked by the
#: config dataclasses when ``fit`` builds the config (the library's one message for each).
_OPTION_PARAMS = {
    "n_components": "prior.n-components", "alpha": "prior.alpha", "beta": "prior.beta",
    "n_iter": "sampler.n-iter", "burn_in": "sampler.burn-in", "thin": "sampler.thin",
    "n_chains": "sampler.n-chains", "matching": "matching.method", "strategy": "aggregation.strategy",
    "rounds": "aggregation.rounds",
}


def _default(param: str):
    return option(_OPTION_PARAMS[param]).default
# Posterior draws used by predict_proba and score (evenly spaced over the global draws).
_PREDICT_DRAWS = 100


def _column_names(frames) -> str | None:
    """``"a,b"``: the columns of one silo's frame (all silos' frames have the same), or None."""
    if frames is None:
        return None
    first = frames if isinstance(frames, pd.DataFrame) else list(frames)[0]
    return ",".join(map(str, first.columns))


class FederatedLatentClassModel(ClusterMixin, BaseEstimator):
    """Federated Bayesian latent class model fitted by Variational Consensus Monte Carlo.

    Parameters
    ----------
    n_components : int, default 15
        C+, components of the over-fitted mixture in each silo: an upper bound, not the number of clusters.
        This differs from StepMix's ``n_components`` (the fixed number of classes K): the number of clusters is
        learned (``n_clusters_``); for the maximum-likelihood model of a fixed K use ``vcmc fit --k K`` or
        ``vcmc.lca.analyse``. Setting it to the K you expect is a trap: the over-fitted prior needs room.
    alpha, beta : float, default 0.01 and 0.5
        Dirichlet concentrations of the weights and of the profiles.
    n_iter : int, default 50,000
        Gibbs iterations per chain in each silo.
    burn_in : int or None, default None
        Iterations discarded at the start of each chain; None means half of ``n_iter``.
    thin : int, default 5
    n_chains : int, default 1
    matching : {"calibrated", "ball", "hungarian", "min-divergence"}, default "calibrated"
    strategy : {"contingency", "federated-gradient", "design"}, default "contingency"
    rounds : int, default 0
        0 (auto): in the analyst's own session ``min(n_iter, 10000)`` rounds from ``n_components`` components
        with split-merge moves (``vcmc.rounds.plan``), the configuration that agrees with full-data MCMC on
        real data where the one-shot pass does not; 1: the paper's one-shot pass; R > 1: R - 1 global-informed
        rounds of the pooled model's Gibbs sampler after it (docs/design.md §16).
    method : {"vcmc", "consensus", "full-mcmc", "fedmerdel", "discgs"}, default "vcmc"
    config : FitConfig or None, default None
        Every other option of the pipeline; the parameters above override its fields.
    random_state : int, numpy Generator or None
    n_jobs : int, default 1
        Worker processes (silos and chains in parallel); the result does not depend on it.

    Attributes
    ----------
    n_clusters_ : int
    weights_ : ndarray of shape (n_clusters_,)
        Posterior mean of the global weights.
    profiles_ : ndarray of shape (n_clusters_, P)
        Posterior mean profiles (flat layout of ``vcmc.model``).
    labels_ : ndarray of shape (n_rows,)
        Global cluster of every training row, silo after silo (each silo labels its own rows).
    result_ : GlobalResult
    schema_ : vcmc.data.Schema
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Present when the training data had string column names.
    covariates_, distal_, distal_tests_ : pandas.DataFrame
        After ``fit(..., covariates=..., distal=...)``: the three-step tables of ``covariates.csv``,
        ``distal.csv`` and ``distal_tests.csv`` (docs/design.md §15.3); None for a model that could not be
        fitted (its reason in ``three_step_warnings_``: the clustering is kept whatever happens there).
    three_step_warnings_ : list of str
        Why a covariate or distal model was not fitted (also issued as a ``UserWarning``).

    Notes
    -----
    StepMix-compatible names where the meaning is the same: ``predict``, ``predict_proba``, ``score``,
    ``aic``, ``bic``, ``caic``, ``sabic``, ``entropy``, ``relative_entropy`` and ``n_parameters`` (of the
    K-cluster model at the posterior mean, StepMix's definitions, docs/design.md §15.2). They differ in
    ``n_components`` (above) and ``score`` (the mean log posterior predictive density over the posterior
    draws, where StepMix's is the mean log-likelihood at its estimate).
    """

    _parameter_constraints: dict = {
        **{param: param_constraint(option(key)) for param, key in _OPTION_PARAMS.items()},
        "beta": [numbers.Real],            # one concentration for every variable (the config also takes one each)
        "method": [StrOptions(set(_METHODS))],
        "config": [FitConfig, None],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(self, *, n_components: int = _default("n_components"), alpha: float = _default("alpha"),
                 beta: float = _default("beta"), n_iter: int = _default("n_iter"),
                 burn_in: int | None = _default("burn_in"), thin: int = _default("thin"),
                 n_chains: int = _default("n_chains"), matching: str = _default("matching"),
                 strategy: str = _default("strategy"), rounds: int = _default("rounds"), method: str = "vcmc",
                 config: FitConfig | None = None,
                 random_state=None, n_jobs: int = 1):
        self.n_components = n_components
        self.alpha = alpha
        self.beta = beta
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.n_chains = n_chains
        self.matching = matching
        self.strategy = strategy
        self.rounds = rounds
        self.method = method
        self.config = config
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.input_tags.allow_nan = True
        tags.non_deterministic = False
        return tags

    # -- configuration -----------------------------------------------------------------------------------
    def _fit_config(self) -> FitConfig:
        import dataclasses

        base = self.config if self.config is not None else FitConfig()
        burn_in = None if self.burn_in is None else int(self.burn_in)   # None: the config's half of n_iter
        return dataclasses.replace(
            base,
            prior=dataclasses.replace(base.prior, n_components=int(self.n_components), alpha=float(self.alpha),
                                      beta=float(self.beta)),
            sampler=dataclasses.replace(base.sampler, n_iter=int(self.n_iter), burn_in=burn_in,
                                        thin=int(self.thin), n_chains=int(self.n_chains)),
            matching=dataclasses.replace(base.matching, method=self.matching),
            aggregation=dataclasses.replace(base.aggregation, strategy=self.strategy, rounds=int(self.rounds)))

    # -- input ---------------------------------------------------------------------------------------------
    @staticmethod
    def _as_parts(x) -> list:
        """The silos of ``x``: a list of 2-D silos, or one silo (a frame, an array or list of rows, a
        ``SiloData``, or a ``SimulatedData``'s silos)."""
        from scipy import sparse

        from vcmc.api import as_silos
        from vcmc.data import SiloData

        if hasattr(x, "silos") and not isinstance(x, list | tuple):
            return as_silos(x)
        if isinstance(x, list | tuple) and x and all(
                isinstance(p, SiloData | pd.DataFrame) or (np.ndim(p) == 2 and not sparse.issparse(p)) for p in x):
            return list(x)
        if sparse.issparse(x) or (isinstance(x, list | tuple) and any(sparse.issparse(p) for p in x)):
            raise TypeError("sparse input is not supported: pass the silos as dense arrays or data frames of "
                            "labels (categorical data, one column per variable).")
        return [x]

    @staticmethod
    def _frame(part, names) -> pd.DataFrame:
        if isinstance(part, pd.DataFrame):
            frame = part
        else:
            arr = np.asarray(part, dtype=object) if not isinstance(part, np.ndarray) else part
            if arr.ndim == 1:
                raise DataError("Expected a 2-D array (rows x variables), got a 1-D array instead. Reshape your "
                                "data either using array.reshape(-1, 1) if it has a single feature or "
                                "array.reshape(1, -1) if it contains a single sample.")
            if arr.ndim != 2:
                raise DataError(f"each silo must be 2-D (rows x variables); got {arr.ndim} dimension(s).")
            if np.iscomplexobj(arr):
                raise DataError("Complex data not supported: the variables must hold category labels.")
            frame = pd.DataFrame(arr, columns=names if names is not None and len(names) == arr.shape[1]
                                 else [f"x{j}" for j in range(arr.shape[1])])
        if frame.shape[1] == 0:
            raise DataError(f"0 feature(s) (shape={frame.shape}) while a minimum of 1 is required.")
        return frame

    def _silos_for_fit(self, x):
        from vcmc.api import as_silos
        from vcmc.data import SiloData, from_dataframe, infer_schema

        parts = self._as_parts(x)
        if all(isinstance(p, SiloData) for p in parts):
            as_silos(parts)     # checks names and schemas; X's order is kept for labels_ (the fit sorts its copy)
            return list(parts), None
        if any(isinstance(p, SiloData) for p in parts):
            raise DataError("mixing SiloData with data frames or arrays in one fit is ambiguous (their schemas "
                            "may differ); pass all silos in one form.")
        frames = [self._frame(p, None) for p in parts]
        cols = [tuple(map(str, f.columns)) for f in frames]
        if len(set(cols)) != 1:
            raise DataError(f"every silo must have the same columns in the same order; silo 1 has {list(cols[0])} "
                            f"and another has {list(next(c for c in cols if c != cols[0]))}.")
        frames = [f.set_axis(list(cols[0]), axis=1) for f in frames]
        schema = infer_schema(frames)
        silos = [from_dataframe(f, schema=schema, name=f"silo_{i + 1}") for i, f in enumerate(frames)]
        names = parts[0].columns if isinstance(parts[0], pd.DataFrame) else None
        return silos, names

    def _codes(self, x) -> np.ndarray:
        """Codes of new rows under the training schema: a code outside it is an error, never a neighbour's."""
        from vcmc.data import SiloData
        from vcmc.data.codes import check_codes

        check_is_fitted(self)
        if isinstance(x, SiloData):
            if x.schema != self.schema_:
                raise DataError("the rows were encoded with another schema than the fit's (fingerprints "
                                f"{x.schema.fingerprint()} and {self.schema_.fingerprint()}).")
            return x.codes
        frame = self._frame(x, list(self.schema_.names))
        if frame.shape[1] != self.n_features_in_:
            raise DataError(f"X has {frame.shape[1]} features, but {type(self).__name__} is expecting "
                            f"{self.n_features_in_} features as input.")
        frame = frame.set_axis(list(self.schema_.names), axis=1)
        codes = self.schema_.encode(frame, source="the new rows")
        return check_codes(codes, self.schema_.n_modalities, where="the new rows")

    # -- scikit-learn API ------------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, covariates=None, distal=None):
        """Fit on the silos ``X`` (``y`` is ignored); returns self.

        ``covariates`` / ``distal``: one data frame per silo (row-aligned with it) of covariates of class
        membership / distal outcomes, kept out of the clustering; then the bias-adjusted three-step models
        are fitted, federated, on the fitted clusters (docs/design.md §15.3) and their tables are
        ``covariates_``, ``distal_`` and ``distal_tests_`` (data frames).
        """
        from vcmc.api import fit

        silos, names = self._silos_for_fit(X)
        result = fit(silos, config=self._fit_config(), method=self.method, rng=self.random_state,
                     jobs=int(self.n_jobs))
        self.result_ = result
        self.schema_ = silos[0].schema
        self.n_features_in_ = len(self.schema_.names)
        if names is not None and all(isinstance(c, str) for c in names):
            self.feature_names_in_ = np.asarray(names, dtype=object)
        keep = result.cluster_sizes > 0
        index = np.cumsum(keep) - 1
        w = result.weights[keep]
        self.weights_ = w / w.sum()
        self.profiles_ = result.profiles[keep]
        self.n_clusters_ = int(keep.sum())
        self._pi_draws = result.pi_draws[:, keep] / result.pi_draws[:, keep].sum(axis=1, keepdims=True)
        self._profile_draws = result.profile_draws[:, keep]
        # the result lists the silos in the canonical order (vcmc.federation.order): labels in X's order
        by_name = dict(zip(result.silos, result.assignments or (), strict=False))
        self.labels_ = (np.concatenate([index[by_name[s.name]] for s in silos]) if result.assignments is not None
                        else None)
        if covariates is not None or distal is not None:
            self._three_step(silos, covariates, distal)
        return self

    def _three_step(self, silos, covariates, distal) -> None:
        from vcmc.lca.analysis import three_step_at

        frames = [f for f in (covariates, distal) if f is not None]
        parts = [[p] if isinstance(p, pd.DataFrame) else list(p) for p in frames]
        joined = [pd.concat([part[i] for part in parts], axis=1) for i in range(len(parts[0]))]
        analysis = three_step_at(silos, joined, self.weights_, self.profiles_, covariates=_column_names(covariates),
                                 distal=_column_names(distal))
        self.three_step_warnings_ = list(analysis.warnings)
        for w in analysis.warnings:
            warnings.warn(w, UserWarning, stacklevel=3)
        self.covariates_ = analysis.covariates.table() if analysis.covariates is not None else None
        self.distal_ = analysis.distal.table() if analysis.distal is not None else None
        self.distal_tests_ = analysis.distal.equality_tests() if analysis.distal is not None else None

    def _all_codes(self, X) -> np.ndarray:
        """Codes of ``X``: one silo, or a list of silos as ``fit`` takes them (their rows together)."""
        parts = X if isinstance(X, list | tuple) and X and all(
            np.ndim(getattr(x, "codes", x)) == 2 for x in X) else None
        return np.concatenate([self._codes(x) for x in parts]) if parts else self._codes(X)

    def _point_statistics(self, X) -> dict:
        from vcmc.lca.em import n_parameters
        from vcmc.lca.statistics import fit_statistics
        from vcmc.rows.lca import estep_sums

        codes = self._all_codes(X)
        sums = estep_sums(codes, self.schema_.n_modalities, self.weights_, self.profiles_)
        return fit_statistics(sums["loglik"], n_parameters(self.n_clusters_, self.schema_.n_modalities),
                              sums["n_rows"], sums["entropy"], self.n_clusters_)

    @property
    def n_parameters(self) -> int:
        """Free parameters of the K-cluster model (StepMix's ``n_parameters``)."""
        from vcmc.lca.em import n_parameters

        check_is_fitted(self)
        return n_parameters(self.n_clusters_, self.schema_.n_modalities)

    def aic(self, X) -> float:
        """Akaike information criterion of the posterior-mean model on ``X`` (StepMix's ``aic``: -2 log L + 2p).
        ``X``: one silo or a list of silos, as ``fit`` takes them."""
        return float(self._point_statistics(X)["aic"])

    def bic(self, X) -> float:
        """Bayesian information criterion on ``X`` (StepMix's ``bic``: -2 log L + p log n; lower is better).
        ``X``: one silo or a list of silos, as ``fit`` takes them."""
        return float(self._point_statistics(X)["bic"])

    def caic(self, X) -> float:
        """Consistent AIC on ``X`` (StepMix's ``caic``: -2 log L + p (log n + 1))."""
        return float(self._point_statistics(X)["caic"])

    def sabic(self, X) -> float:
        """Sample-size adjusted BIC on ``X`` (-2 log L + p log((n + 2) / 24), Sclove 1987; docs/design.md §15.2)."""
        return float(self._point_statistics(X)["sabic"])

    def entropy(self, X) -> float:
        """Summed entropy of the rows' cluster memberships at the posterior mean (StepMix's ``entropy``)."""
        return float(self._point_statistics(X)["entropy"])

    def relative_entropy(self, X) -> float:
        """1 - entropy / (n log K) (StepMix's ``relative_entropy``; NaN for one cluster)."""
        return float(self._point_statistics(X)["relative_entropy"])

    def _draws(self):
        idx = evenly_spaced(self._pi_draws.shape[0], _PREDICT_DRAWS)
        return self._pi_draws[idx], self._profile_draws[idx]

    def predict_proba(self, X) -> np.ndarray:
        """Membership of new rows in the global clusters, averaged over posterior draws, (n_rows, n_clusters_)."""
        from vcmc.rows.memberships import posterior_memberships

        codes = self._codes(X)
        pi, prof = self._draws()
        return posterior_memberships(codes, self.schema_.n_modalities, pi, prof)

    def predict(self, X) -> np.ndarray:
        """Most probable global cluster (0-based) of new rows."""
        return np.argmax(self.predict_proba(X), axis=1)

    def score(self, X, y=None) -> float:
        """Mean log posterior predictive density of the rows of ``X`` (nats per row; higher is better).

        ``X`` may also be a list of silos (as ``fit`` takes), so that scikit-learn's model selection
        (``cross_val_score``, ``GridSearchCV``) splitting a list of silos scores the held-out silos' rows."""
        codes = self._all_codes(X)
        pi, prof = self._draws()
        per_draw = np.stack([logsumexp(log_likelihood_rows(codes, np.maximum(pi[t], 1e-300), prof[t],
                                                           self.schema_.n_modalities), axis=1)
                             for t in range(pi.shape[0])])
        return float(np.mean(logsumexp(per_draw, axis=0) - np.log(pi.shape[0])))

