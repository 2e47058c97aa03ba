"""Covariates of class membership and distal outcomes: the bias-adjusted (ML) three-step method, federated.

docs/design.md §15.3. Step 1 is the measurement model (``vcmc.lca.em``). Step 2: every silo assigns its
rows to their modal class and returns the expected counts of (class, modal class) pairs
(``LcaClassifyRequest``); the server forms the classification-error matrix ``D[c, s] = P(modal = s |
class = c)`` exactly as StepMix's ``compute_bch_matrix`` (from the pooled sums). Step 3 maximises the
ML-corrected likelihood ``sum_i log sum_c P(c | .) D[c, W_i] (...)`` (Vermunt 2010; StepMix
``correction="ML"``) with rounds of per-silo sums: Newton rounds of the score and Hessian for the
covariate model (as DataSHIELD's ``ds.glm``), EM rounds of posterior-weighted moments for the distal
model, and its Hessian at the optimum for the standard errors. Standard errors are the inverse observed
information of step 3 (the measurement model taken as known, as StepMix and Vermunt's three-step do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from vcmc.exceptions import ConfigError, ConvergenceError
from vcmc.lca.em import Ask, LcaFit, ask_all
from vcmc.protocol.lca import LcaClassifyRequest, LcaStructuralReply, LcaStructuralRequest
from vcmc.rows.lca import AuxiliarySpec, covariate_terms, distal_layout

Z95 = float(stats.norm.ppf(0.975))


def classification_error(call: Ask, names, fit: LcaFit) -> np.ndarray:
    """``D[c, s] = sum_i r_ic 1[W_i = s] / sum_i r_ic`` from the silos' summed cross-classifications."""
    replies = ask_all(call, names, LcaClassifyRequest(pi=fit.pi, profiles=fit.profiles))
    cross = np.sum([np.asarray(replies[n].cross) for n in names], axis=0)
    return cross / np.maximum(cross.sum(axis=1, keepdims=True), 1e-300)


def _log_error(error: np.ndarray) -> np.ndarray:
    return np.log(np.clip(error, 1e-15, 1 - 1e-15))      # StepMix's compute_log_emission_pm


@dataclass(frozen=True)
class StructuralTotals:
    n_rows: int
    loglik: float
    score: np.ndarray
    hessian: np.ndarray
    moments: np.ndarray


def structural_round(call: Ask, names, model: str, spec: AuxiliarySpec, fit: LcaFit, log_error,
                     params) -> StructuralTotals:
    """One round: every silo's sums at ``params``, added in the silos' order."""
    request = LcaStructuralRequest(model=model, spec_json=spec.to_json(), pi=fit.pi, profiles=fit.profiles,
                                   log_error=np.asarray(log_error, float), params=np.asarray(params, float))
    replies = ask_all(call, names, request)
    reps: list[LcaStructuralReply] = [replies[n] for n in names]
    return StructuralTotals(n_rows=sum(int(r.n_rows) for r in reps), loglik=float(sum(r.loglik for r in reps)),
                            score=np.sum([r.score for r in reps], axis=0),
                            hessian=np.sum([r.hessian for r in reps], axis=0),
                            moments=np.sum([r.moments for r in reps], axis=0))


def _covariance(hessian: np.ndarray, what: str) -> np.ndarray:
    info = -0.5 * (hessian + hessian.T)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        raise ConvergenceError(f"{what}: the information matrix is singular (a covariate level without rows in "
                               "some class, or collinear covariates); standard errors are undefined") from None
    if np.any(np.diag(cov) <= 0):
        raise ConvergenceError(f"{what}: the information matrix is not positive definite at the estimate")
    return cov


@dataclass(frozen=True)
class CovariateFit:
    """Multinomial logit of class on covariates: log odds of each class against ``reference`` (class 1)."""

    terms: tuple[str, ...]
    coef: np.ndarray          # (K-1, D): classes 2..K
    cov: np.ndarray           # ((K-1) D, (K-1) D)
    loglik: float
    n_rows: int
    n_rounds: int
    reference: int = 1

    def table(self):
        """``covariates.csv``: cluster, term, estimate, se, ci95_low, ci95_high (clusters from 1)."""
        import pandas as pd

        se = np.sqrt(np.diag(self.cov)).reshape(self.coef.shape)
        rows = [{"cluster": c + 2, "term": t, "estimate": self.coef[c, j], "se": se[c, j],
                 "ci95_low": self.coef[c, j] - Z95 * se[c, j], "ci95_high": self.coef[c, j] + Z95 * se[c, j]}
                for c in range(self.coef.shape[0]) for j, t in enumerate(self.terms)]
        return pd.DataFrame(rows, columns=["cluster", "term", "estimate", "se", "ci95_low", "ci95_high"])


def fit_covariates(call: Ask, names, fit: LcaFit, spec: AuxiliarySpec, *, error: np.ndarray | None = None,
                   max_iter: int = 100, tol: float = 1e-8) -> CovariateFit:
    """Newton rounds (step halving when the log-likelihood would fall) from zero log odds."""
    if fit.k < 2:
        raise ConfigError("covariates of class membership need at least 2 classes (--k 2 or more)")
    error = classification_error(call, names, fit) if error is None else error
    log_e = _log_error(error)
    terms = covariate_terms(spec)
    params = np.zeros((fit.k - 1) * len(terms))
    cur = structural_round(call, names, "covariate", spec, fit, log_e, params)
    rounds = 1
    for _ in range(max_iter):
        try:
            step = np.linalg.solve(-cur.hessian, cur.score)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(-cur.hessian, cur.score, rcond=None)[0]
        if not np.all(np.isfinite(step)) or np.linalg.norm(step) > 1e6:
            step = 1e-2 * cur.score       # far from the optimum the Hessian may not be negative definite
        t = 1.0
        while True:
            trial = structural_round(call, names, "covariate", spec, fit, log_e, params + t * step)
            rounds += 1
            if trial.loglik >= cur.loglik - 1e-12 * abs(cur.loglik) or t < 1e-8:
                break
            t *= 0.5
        params = params + t * step
        gain = trial.loglik - cur.loglik
        cur = trial
        if abs(gain) < tol * max(1.0, abs(cur.loglik)) and np.max(np.abs(t * step)) < 1e-6:
            break
    else:
        raise ConvergenceError(f"the covariate model did not converge in {max_iter} Newton rounds")
    cov = _covariance(cur.hessian, "covariate model")
    return CovariateFit(terms=tuple(terms), coef=params.reshape(fit.k - 1, len(terms)), cov=cov,
                        loglik=cur.loglik, n_rows=cur.n_rows, n_rounds=rounds)


# -- distal outcomes ------------------------------------------------------------------------------------------

def _moment_columns(spec: AuxiliarySpec) -> list[tuple[int, int]]:
    """Per outcome: (first moment column, number of columns) in the reply's ``moments``."""
    out, start = [], 1
    for col in spec.columns:
        width = 1 + (len(col.levels) if col.kind == "categorical" else 2)
        out.append((start, width))
        start += width
    return out


def _distal_m_step(moments: np.ndarray, spec: AuxiliarySpec, k: int, n_rows: int) -> np.ndarray:
    """Closed-form maximiser of the EM surrogate from the posterior-weighted moments."""
    layout = distal_layout(spec, k)
    params = np.zeros(layout[-1][1].stop)
    pi = np.clip(moments[:, 0] / n_rows, 1e-12, None)
    params[layout[0][1]] = np.log(pi[1:] / pi[0])
    for col, (start, width), (_, sl) in zip(spec.columns, _moment_columns(spec), layout[1:], strict=True):
        obs = np.maximum(moments[:, start], 1e-300)
        if col.kind == "categorical":
            q = np.clip(moments[:, start + 1:start + width] / obs[:, None], 1e-12, None)
            params[sl] = np.log(q[:, 1:] / q[:, :1]).ravel()
        else:
            mean = moments[:, start + 1] / obs
            var = np.maximum(moments[:, start + 2] / obs - mean ** 2, 1e-12)
            params[sl] = np.concatenate([mean, 0.5 * np.log(var)])
    return params


@dataclass(frozen=True)
class DistalFit:
    """Outcomes by class: parameters, their covariance and the class-wise estimates with delta-method s.e."""

    spec: AuxiliarySpec
    k: int
    params: np.ndarray
    cov: np.ndarray
    loglik: float
    n_rows: int
    n_rounds: int

    def _estimates(self, col_index: int) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Levels, estimates (K, L') and their Jacobian (K, L', D) in the parameters."""
        col = self.spec.columns[col_index]
        sl = distal_layout(self.spec, self.k)[col_index + 1][1]
        block = self.params[sl]
        dim = self.params.size
        if col.kind == "categorical":
            n_lev = len(col.levels)
            gamma = np.hstack([np.zeros((self.k, 1)), block.reshape(self.k, n_lev - 1)])
            q = np.exp(gamma - gamma.max(axis=1, keepdims=True))
            q /= q.sum(axis=1, keepdims=True)
            jac = np.zeros((self.k, n_lev, dim))
            for c in range(self.k):
                d = np.diag(q[c]) - np.outer(q[c], q[c])           # dq_l / dgamma_m
                jac[c, :, sl.start + c * (n_lev - 1): sl.start + (c + 1) * (n_lev - 1)] = d[:, 1:]
            return list(col.levels), q, jac
        jac = np.zeros((self.k, 1, dim))
        for c in range(self.k):
            jac[c, 0, sl.start + c] = 1.0
        return ["mean"], block[:self.k, None], jac

    def table(self):
        """``distal.csv``: cluster, outcome, level, estimate, se, ci95_low, ci95_high."""
        import pandas as pd

        rows = []
        for j, col in enumerate(self.spec.columns):
            levels, est, jac = self._estimates(j)
            var = np.einsum("cld,de,cle->cl", jac, self.cov, jac)
            se = np.sqrt(np.maximum(var, 0))
            for c in range(self.k):
                for li, lev in enumerate(levels):
                    rows.append({"cluster": c + 1, "outcome": col.name, "level": lev, "estimate": est[c, li],
                                 "se": se[c, li], "ci95_low": est[c, li] - Z95 * se[c, li],
                                 "ci95_high": est[c, li] + Z95 * se[c, li]})
        return pd.DataFrame(rows, columns=["cluster", "outcome", "level", "estimate", "se", "ci95_low",
                                           "ci95_high"])

    def equality_tests(self):
        """Wald test per outcome that the probabilities (or means) are equal in every class.

        The contrasts ``theta_c - theta_1`` (c = 2..K; categorical: levels 2..L) with delta-method
        covariance; chi-square with (K-1)(L-1) (categorical) or K-1 (numeric) degrees of freedom.
        """
        import pandas as pd

        rows = []
        for j, col in enumerate(self.spec.columns):
            _, est, jac = self._estimates(j)
            keep = slice(1, None) if col.kind == "categorical" else slice(0, 1)
            est, jac = est[:, keep], jac[:, keep]
            diff = (est[1:] - est[:1]).ravel()
            jd = (jac[1:] - jac[:1]).reshape(diff.size, -1)
            v = jd @ self.cov @ jd.T
            stat = float(diff @ np.linalg.pinv(v) @ diff)
            df = int(diff.size)
            rows.append({"outcome": col.name, "test": "wald", "statistic": stat, "df": df,
                         "p_value": float(stats.chi2.sf(stat, df))})
        return pd.DataFrame(rows, columns=["outcome", "test", "statistic", "df", "p_value"])


def fit_distal(call: Ask, names, fit: LcaFit, spec: AuxiliarySpec, *, error: np.ndarray | None = None,
               max_iter: int = 500, tol: float = 1e-10) -> DistalFit:
    """EM rounds of the ML-corrected distal model from the uncorrected class-wise moments."""
    if fit.k < 2:
        raise ConfigError("distal outcomes by class need at least 2 classes (--k 2 or more)")
    error = classification_error(call, names, fit) if error is None else error
    log_e = _log_error(error)
    k = fit.k
    # start: the classes' shares and outcome moments with no outcome information (params of a flat model)
    params = np.zeros(distal_layout(spec, k)[-1][1].stop)
    cur = structural_round(call, names, "distal", spec, fit, log_e, params)
    rounds = 1
    # first M-step from the posterior without the outcomes' information is the start of EM
    for _ in range(max_iter):
        before = params
        params = _distal_m_step(cur.moments, spec, k, cur.n_rows)
        new = structural_round(call, names, "distal", spec, fit, log_e, params)
        rounds += 1
        gain = new.loglik - cur.loglik
        cur = new
        # a log-likelihood on the silos' grid (docs/design.md §13) that did not change: go on while the
        # parameters move
        if abs(gain) < tol * max(1.0, abs(cur.loglik)) and (gain != 0.0 or np.max(np.abs(params - before)) < 1e-6):
            break
    else:
        raise ConvergenceError(f"the distal model did not converge in {max_iter} EM rounds")
    cov = _covariance(cur.hessian, "distal model")
    return DistalFit(spec=spec, k=k, params=params, cov=cov, loglik=cur.loglik, n_rows=cur.n_rows, n_rounds=rounds)
