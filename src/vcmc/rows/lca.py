"""Silo side of the maximum-likelihood latent class analysis (docs/design.md §15).

Everything here runs INSIDE the silo, on its rows, and returns sums over them: one function per request
type (``estep_sums``, ``classify_sums``, ``structural_sums``), which the silo's latent class endpoint
(``vcmc.silo.endpoints.lca``) wraps into replies. Nothing returned has a dimension equal to the silo's row
count; errors name columns, never values.

The auxiliary columns (covariates of class membership, distal outcomes) are columns of the silo's file kept
out of the clustering; ``AuxiliarySpec`` is their coding, agreed by every silo (kinds and level labels),
sent in the request, and ``encode_auxiliary`` applies it to the silo's own column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from vcmc.exceptions import ConfigError, DataError
from vcmc.model import profile_offsets

PROB_CLIP = 1e-15          # StepMix clips every probability to [1e-15, 1 - 1e-15] before its log
MIN_ROWS_PER_VALUE = 2.0   # fewer rows per distinct value than this: the column identifies people


# -- the coding of the auxiliary columns ---------------------------------------------------------------------

@dataclass(frozen=True)
class AuxiliaryColumn:
    """One auxiliary column: ``kind`` "numeric" or "categorical" (then ``levels``, the first the reference)."""

    name: str
    kind: str
    levels: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in ("numeric", "categorical"):
            raise ConfigError(f"column {self.name!r}: kind must be 'numeric' or 'categorical'; got {self.kind!r}")
        if self.kind == "categorical" and len(self.levels) < 2:
            raise ConfigError(f"column {self.name!r}: a categorical column needs at least 2 levels; got "
                              f"{len(self.levels)}")


@dataclass(frozen=True)
class AuxiliarySpec:
    """The auxiliary columns of one structural model, in order."""

    columns: tuple[AuxiliaryColumn, ...]

    def to_json(self) -> str:
        return json.dumps([{"name": c.name, "kind": c.kind, "levels": list(c.levels)} for c in self.columns])

    @classmethod
    def from_json(cls, text: str) -> AuxiliarySpec:
        try:
            items = json.loads(text)
            return cls(tuple(AuxiliaryColumn(str(d["name"]), str(d["kind"]), tuple(str(v) for v in d["levels"]))
                             for d in items))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"malformed auxiliary column specification ({type(exc).__name__})") from None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def check_not_identifying(values, name: str, where: str) -> None:
    """Refuse a column with fewer than ``MIN_ROWS_PER_VALUE`` rows per distinct value (an identifier).

    A covariate or outcome with about one value per row singles people out as a row identifier does; it is
    refused like one (the message names the column only, never a value).
    """
    import pandas as pd

    s = pd.Series(values)
    observed = s.dropna()
    n_distinct = int(observed.nunique())
    if len(observed) >= 2 and n_distinct > len(observed) / MIN_ROWS_PER_VALUE:
        raise DataError(f"{where}: column {name!r} has {n_distinct} distinct values among {len(observed)} rows "
                        f"(fewer than {MIN_ROWS_PER_VALUE:g} rows per value): it would identify people, like a "
                        "row identifier; round or group it before using it as a covariate or outcome")


def encode_auxiliary(frame, spec: AuxiliarySpec, *, where: str) -> list[np.ndarray]:
    """The silo's auxiliary columns coded by ``spec``: float with NaN (numeric), int with -1 (categorical).

    Raises
    ------
    DataError
        A column is absent, a numeric column holds text, a categorical column holds a label outside the
        agreed levels, or a column would identify people. Messages name the column, never a value.
    """
    import pandas as pd

    if frame is None:
        raise DataError(f"{where}: no auxiliary columns were given to this silo; the analysis needs "
                        f"{list(spec.names)}")
    out = []
    for col in spec.columns:
        if col.name not in frame.columns:
            raise DataError(f"{where}: column {col.name!r} is not in the silo's file; found {list(frame.columns)}")
        raw = frame[col.name]
        check_not_identifying(raw, col.name, where)
        if col.kind == "numeric":
            values = pd.to_numeric(raw, errors="coerce")
            bad = values.isna() & raw.notna()
            if bad.any():
                raise DataError(f"{where}: numeric column {col.name!r} has {int(bad.sum())} cell(s) that are not "
                                "numbers; say it is categorical, or clean the column")
            out.append(values.to_numpy(dtype=np.float64))
        else:
            index = {lev: i for i, lev in enumerate(col.levels)}
            seen = raw.notna().to_numpy()
            codes = np.array([index.get(cell_label(v), -2) if ok else -1
                              for v, ok in zip(raw.tolist(), seen, strict=True)], dtype=np.int64)
            if np.any(codes == -2):
                raise DataError(f"{where}: categorical column {col.name!r} has {int(np.sum(codes == -2))} cell(s) "
                                f"outside its {len(col.levels)} agreed levels")
            out.append(codes)
    return out


def cell_label(v) -> str:
    """A cell's label as text: 1.0 and 1 are the same level of a column read as numbers."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


# -- the measurement model -----------------------------------------------------------------------------------

def check_point(codes, n_modalities, pi, profiles) -> tuple[np.ndarray, np.ndarray]:
    p = int(np.sum(n_modalities))
    pi = np.asarray(pi, dtype=np.float64)
    profiles = np.asarray(profiles, dtype=np.float64)
    if pi.ndim != 1 or profiles.shape != (pi.size, p) or pi.size < 1:
        raise ConfigError(f"a latent class request needs pi (K,) and profiles (K, {p}); got {pi.shape} and "
                          f"{profiles.shape}")
    if not (np.all(np.isfinite(pi)) and np.all(np.isfinite(profiles))):
        raise ConfigError("a latent class request has non-finite parameters")
    return pi, profiles


def one_hot(codes, n_modalities) -> np.ndarray:
    """(n, P) indicator of each row's modality of each variable (all zero for a missing cell)."""
    offsets = profile_offsets(n_modalities)
    out = np.zeros((codes.shape[0], int(offsets[-1])))
    for q in range(codes.shape[1]):
        x = codes[:, q].astype(np.int64)
        seen = x >= 0
        out[np.flatnonzero(seen), offsets[q] + x[seen]] = 1.0
    return out


def _row_logsumexp(a: np.ndarray) -> np.ndarray:
    # by hand rather than scipy.special.logsumexp: the same arithmetic without its input checks, which took
    # half of each EM round's time on a silo of 300 rows
    top = a.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=1, keepdims=True)))[:, 0]


def log_joint(indicators, pi, profiles) -> np.ndarray:
    """``log pi_k + sum_q log p_{q, x_iq, k}`` of each row and class, (n, K); missing cells skipped.

    ``indicators`` is ``one_hot(codes, n_modalities)``. This is StepMix's categorical model with missing
    values ("categorical_nan": full-information likelihood, a missing cell contributes nothing),
    probabilities clipped as StepMix does.
    """
    log_prof = np.log(np.clip(profiles, PROB_CLIP, 1 - PROB_CLIP))
    return indicators @ log_prof.T + np.log(np.clip(pi, PROB_CLIP, 1.0))[None, :]


def responsibilities(indicators, pi, profiles, extra=None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's class memberships (n, K) and log-likelihood (n,) (row-level: stays in the silo); ``extra``
    (n, K): the log-likelihood of the rows' other items (the Gaussian ones), added to the joint."""
    joint = log_joint(indicators, pi, profiles)
    if extra is not None:
        joint = joint + extra
    row_ll = _row_logsumexp(joint)
    return np.exp(joint - row_ll[:, None]), row_ll


def estep_sums(codes, n_modalities, pi, profiles, indicators=None, values=None, gaussian=None) -> dict[str, object]:
    """Expected cluster and modality counts, log-likelihood and entropy summed over the rows; with Gaussian items
    (``values`` standardised, ``gaussian`` (K, 2G) their means and variances: StepMix's ``gaussian_diag`` with
    missing values skipped) also their expected sums, ``gaussian`` (K, 3G)."""
    from vcmc.family import GAUSSIAN

    indicators = one_hot(codes, n_modalities) if indicators is None else indicators
    extra = None if gaussian is None else GAUSSIAN.log_likelihood_rows(values, gaussian, np.shape(values)[1])
    resp, row_ll = responsibilities(indicators, pi, profiles, extra)
    clipped = np.clip(resp, PROB_CLIP, 1 - PROB_CLIP)
    out = {"n_rows": int(codes.shape[0]), "cluster": resp.sum(axis=0), "modality": resp.T @ indicators,
           "loglik": float(row_ll.sum()), "entropy": float(-np.sum(clipped * np.log(clipped)))}
    if gaussian is not None:
        seen = ~np.isnan(values)
        x = np.where(seen, values, 0.0)
        out["gaussian"] = np.concatenate([resp.T @ seen, resp.T @ x, resp.T @ (x * x)], axis=1)
    return out


def classify_sums(codes, n_modalities, pi, profiles) -> np.ndarray:
    """Expected counts of (class c, modal class s), (K, K): the classification error of the three-step methods."""
    pi, profiles = check_point(codes, n_modalities, pi, profiles)
    resp, _ = responsibilities(one_hot(codes, n_modalities), pi, profiles)
    modal = np.zeros_like(resp)
    modal[np.arange(resp.shape[0]), np.argmax(resp, axis=1)] = 1.0
    return resp.T @ modal


# -- the structural models (ML-corrected three-step, Vermunt 2010) ----------------------------------------

def covariate_design(columns: list[np.ndarray], spec: AuxiliarySpec, *, where: str) -> np.ndarray:
    """Intercept, numeric columns as they are, categorical columns as indicators of levels 2.. (n, D).

    Missing covariates are refused, as StepMix's covariate model does (it validates its input as finite).
    """
    parts = [np.ones((columns[0].shape[0] if columns else 0, 1))]
    for col, values in zip(spec.columns, columns, strict=True):
        missing = np.isnan(values) if col.kind == "numeric" else values < 0
        if missing.any():
            raise DataError(f"{where}: covariate {col.name!r} has {int(missing.sum())} missing value(s); "
                            "StepMix's covariate model refuses missing covariates and so does vcmc: remove or "
                            "impute those rows first")
        if col.kind == "numeric":
            parts.append(values[:, None])
        else:
            parts.append((values[:, None] == np.arange(1, len(col.levels))[None, :]).astype(np.float64))
    return np.hstack(parts)


def covariate_terms(spec: AuxiliarySpec) -> list[str]:
    """Names of the design's columns: ``intercept``, ``NAME`` (numeric), ``NAME=LEVEL`` (categorical)."""
    out = ["intercept"]
    for col in spec.columns:
        out += [col.name] if col.kind == "numeric" else [f"{col.name}={lev}" for lev in col.levels[1:]]
    return out


def covariate_sums(design, log_e, params) -> dict[str, object]:
    """Log-likelihood ``sum_i log sum_c P(c | z_i) e_ic``, score and Hessian of the multinomial logit.

    ``params`` are the (K-1, D) log odds of classes 2..K against class 1, flattened by class. With
    ``p_i = softmax(eta_i)`` and ``w_i`` the posterior ``p_ic e_ic / sum``, the score is
    ``sum_i (w_i - p_i)[1:] (x) z_i`` and the Hessian (Louis' identity: the mixture's observed information)
    ``sum_i [(diag w_i - w_i w_i') - (diag p_i - p_i p_i')][1:, 1:] (x) z_i z_i'``.
    """
    n, d = design.shape
    k = log_e.shape[1]
    beta = np.asarray(params, dtype=np.float64).reshape(k - 1, d)
    eta = np.hstack([np.zeros((n, 1)), design @ beta.T])
    log_p = eta - logsumexp(eta, axis=1, keepdims=True)
    joint = log_p + log_e
    row_ll = logsumexp(joint, axis=1)
    w = np.exp(joint - row_ll[:, None])
    p = np.exp(log_p)
    score = ((w - p)[:, 1:].T @ design).ravel()
    a = (np.einsum("ia,ab->iab", w[:, 1:], np.eye(k - 1)) - w[:, 1:, None] * w[:, None, 1:]
         - np.einsum("ia,ab->iab", p[:, 1:], np.eye(k - 1)) + p[:, 1:, None] * p[:, None, 1:])
    hessian = np.einsum("iab,ij,il->ajbl", a, design, design).reshape((k - 1) * d, (k - 1) * d)
    return {"n_rows": int(n), "loglik": float(row_ll.sum()), "score": score, "hessian": hessian,
            "moments": np.zeros((k, 0))}


def distal_layout(spec: AuxiliarySpec, k: int) -> list[tuple[str, slice]]:
    """Where each block of the distal parameters sits: class logits, then per outcome its block.

    Class logits: K-1 (classes 2..K against 1). A categorical outcome with L levels: (K, L-1) log odds of
    levels 2..L against level 1, by class. A numeric outcome: K means, then K log standard deviations.
    """
    out = [("class", slice(0, k - 1))]
    start = k - 1
    for col in spec.columns:
        size = k * (len(col.levels) - 1) if col.kind == "categorical" else 2 * k
        out.append((col.name, slice(start, start + size)))
        start += size
    return out


def distal_sums(columns: list[np.ndarray], spec: AuxiliarySpec, log_e, params) -> dict[str, object]:
    """Log-likelihood, score, Hessian and posterior moments of the ML-corrected distal model.

    Per row ``log sum_c pi_c e_ic prod_o f_o(y_io | c)`` (a missing outcome contributes nothing, as in
    StepMix's ``*_nan`` models). Score and Hessian by Louis' identity: with ``w_ic`` the posterior and
    ``g_ic``, ``h_ic`` the gradient and Hessian of the complete-data log-density of class c, the row's
    Hessian is ``sum_c w_ic (h_ic + g_ic g_ic') - gbar_i gbar_i'``, ``gbar_i = sum_c w_ic g_ic``.
    """
    n, k = log_e.shape
    params = np.asarray(params, dtype=np.float64)
    layout = distal_layout(spec, k)
    dim = layout[-1][1].stop
    if params.shape != (dim,):
        raise ConfigError(f"distal model: expected {dim} parameters, got shape {params.shape}")
    alpha = np.concatenate([[0.0], params[layout[0][1]]])
    log_pi = alpha - logsumexp(alpha)
    pi = np.exp(log_pi)
    comp = np.tile(log_pi, (n, 1)) + log_e                   # (n, K) complete-data log-density
    grads = np.zeros((n, k, dim))                              # g_ic
    grads[:, :, layout[0][1]] = np.eye(k)[None, :, 1:] - pi[None, None, 1:]
    blocks = []
    for col, values, (_, sl) in zip(spec.columns, columns, layout[1:], strict=True):
        block = params[sl]
        if col.kind == "categorical":
            n_lev = len(col.levels)
            gamma = np.hstack([np.zeros((k, 1)), block.reshape(k, n_lev - 1)])
            log_q = gamma - logsumexp(gamma, axis=1, keepdims=True)          # (K, L)
            seen = values >= 0
            y = np.where(seen, values, 0)
            comp[seen] += log_q[:, y[seen]].T
            onehot = np.eye(n_lev)[y][:, 1:] * seen[:, None]                 # (n, L-1)
            q = np.exp(log_q)
            for c in range(k):
                cols = np.arange(sl.start + c * (n_lev - 1), sl.start + (c + 1) * (n_lev - 1))
                grads[:, c, cols] = (onehot - q[c, 1:][None, :]) * seen[:, None]
            blocks.append(("categorical", col, sl, seen, y, q))
        else:
            mu, log_sd = block[:k], block[k:]
            var = np.exp(2 * log_sd)
            seen = ~np.isnan(values)
            y = np.where(seen, values, 0.0)
            resid = y[:, None] - mu[None, :]                                  # (n, K)
            logf = -0.5 * np.log(2 * np.pi) - log_sd[None, :] - 0.5 * resid ** 2 / var[None, :]
            comp[seen] += logf[seen]
            for c in range(k):
                grads[:, c, sl.start + c] = seen * resid[:, c] / var[c]
                grads[:, c, sl.start + k + c] = seen * (resid[:, c] ** 2 / var[c] - 1.0)
            blocks.append(("numeric", col, sl, seen, y, (mu, var, resid)))
    row_ll = logsumexp(comp, axis=1)
    w = np.exp(comp - row_ll[:, None])                                     # (n, K) posterior
    gbar = np.einsum("ic,icd->id", w, grads)
    score = gbar.sum(axis=0)
    hessian = np.einsum("ic,icd,ice->de", w, grads, grads) - gbar.T @ gbar
    # sum_c w_ic h_ic: the class logits' block is the same for every class
    a = layout[0][1]
    hessian[a, a] -= n * (np.diag(pi[1:]) - np.outer(pi[1:], pi[1:]))
    moments = [w.sum(axis=0)[:, None]]
    for kind, _col, sl, seen, y, extra in blocks:
        ws = w * seen[:, None]
        moments.append(ws.sum(axis=0)[:, None])
        if kind == "categorical":
            q = extra
            n_lev = q.shape[1]
            moments.append(ws.T @ np.eye(n_lev)[y])
            for c in range(k):
                cols = slice(sl.start + c * (n_lev - 1), sl.start + (c + 1) * (n_lev - 1))
                qc = q[c, 1:]
                hessian[cols, cols] -= ws[:, c].sum() * (np.diag(qc) - np.outer(qc, qc))
        else:
            mu, var, resid = extra
            moments.append((ws * y[:, None]).sum(axis=0)[:, None])
            moments.append((ws * (y ** 2)[:, None]).sum(axis=0)[:, None])
            for c in range(k):
                im, isd = sl.start + c, sl.start + k + c
                hessian[im, im] -= ws[:, c].sum() / var[c]
                cross = 2 * np.sum(ws[:, c] * resid[:, c]) / var[c]
                hessian[im, isd] -= cross
                hessian[isd, im] -= cross
                hessian[isd, isd] -= 2 * np.sum(ws[:, c] * resid[:, c] ** 2) / var[c]
    return {"n_rows": int(n), "loglik": float(row_ll.sum()), "score": score, "hessian": hessian,
            "moments": np.hstack(moments)}


def structural_sums(codes, n_modalities, auxiliary, *, model: str, spec_json: str, pi, profiles, log_error,
                    params, where: str) -> dict[str, object]:
    """One round of the three-step covariate or distal model: sums over the silo's rows at ``params``, the
    rows' modal classes recomputed at the measurement model ``(pi, profiles)``."""
    pi, profiles = check_point(codes, n_modalities, pi, profiles)
    k = pi.size
    log_error = np.asarray(log_error, dtype=np.float64)
    if log_error.shape != (k, k):
        raise ConfigError(f"structural request: log_error must be ({k}, {k}); got {log_error.shape}")
    spec = AuxiliarySpec.from_json(spec_json)
    columns = encode_auxiliary(auxiliary, spec, where=where)
    resp, _ = responsibilities(one_hot(codes, n_modalities), pi, profiles)
    modal = np.argmax(resp, axis=1)
    log_e = log_error[:, modal].T                     # (n, K): log P(modal class of row i | class c)
    if model == "covariate":
        design = covariate_design(columns, spec, where=where)
        expected = (k - 1) * design.shape[1]
        if np.asarray(params).shape != (expected,):
            raise ConfigError(f"covariate model: expected {expected} parameters, got shape "
                              f"{np.asarray(params).shape}")
        return covariate_sums(design, log_e, params)
    if model == "distal":
        return distal_sums(columns, spec, log_e, params)
    raise ConfigError(f"structural request model must be 'covariate' or 'distal'; got {model!r}")


def _binade(values) -> float:
    """The power of two at or above the median absolute value of a column (at least 1): a typical row's scale,
    which no single row moves, and the only thing the grid of a structural sum uses of the column
    (docs/design.md §15.6)."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    v = v[np.isfinite(v)]
    mid = float(np.median(v)) if v.size else 0.0
    return float(2.0 ** np.ceil(np.log2(mid))) if mid > 1.0 else 1.0


def structural_worths(auxiliary, *, model: str, spec_json: str, k: int, params, where: str) -> dict[str, object]:
    """What a typical row adds to each sum of a structural reply (``structural_sums``), entry by entry, from the
    request's parameters and, for a numeric column, the power of two at or above its median absolute value (of
    a numeric outcome's distance from each class's mean, for its mean and log-sd terms) (``_binade``: of the
    whole column, whichever rows the parameters weight, so that the grid follows no one row). A scalar sum is
    released on a grid of several rows' worth of it (``vcmc.silo.endpoints.lca``).

    Returns ``loglik`` (float), ``score`` (D,), ``hessian`` (D, D) and ``moments`` (K, M) worths.
    """
    spec = AuxiliarySpec.from_json(spec_json)
    columns = encode_auxiliary(auxiliary, spec, where=where)
    params = np.asarray(params, dtype=np.float64)
    if model == "covariate":
        scale = np.concatenate([[1.0], *[[_binade(v)] if c.kind == "numeric" else np.ones(len(c.levels) - 1)
                                         for c, v in zip(spec.columns, columns, strict=True)]])
        score = np.tile(scale, k - 1)
        return {"loglik": float(np.log(max(k, 2))), "score": score, "hessian": np.outer(score, score),
                "moments": np.zeros((k, 0))}
    layout = distal_layout(spec, k)
    score = np.ones(layout[-1][1].stop)
    loglik = float(np.log(max(k, 2)))
    moments = [np.ones((k, 1))]
    for col, values, (_, sl) in zip(spec.columns, columns, layout[1:], strict=True):
        moments.append(np.ones((k, 1)))
        if col.kind == "categorical":
            loglik += float(np.log(len(col.levels)))
            moments.append(np.ones((k, len(col.levels))))
            continue
        top = _binade(values)
        block = params[sl] if params.shape == (layout[-1][1].stop,) else np.zeros(2 * k)
        mu, var = block[:k], np.exp(2 * block[k:])
        # a typical row's distance from each class's mean at the request's parameters (the median's binade:
        # no one row moves it), so the grid of a mean's or a log-sd's sum scales with 1 / var as the sum does
        reach = np.array([_binade(values - m) for m in mu])
        score[sl.start:sl.start + k] = reach / var
        score[sl.start + k:sl.stop] = reach ** 2 / var + 1.0
        loglik += float(np.max(0.92 + np.abs(block[k:]) + reach ** 2 / (2 * var)))
        moments += [np.full((k, 1), top), np.full((k, 1), top ** 2)]
    return {"loglik": loglik, "score": score, "hessian": np.outer(score, score), "moments": np.hstack(moments)}
