"""Standard errors and intervals of the item-response probabilities of a latent class model (docs/design.md §15.1).

The observed information of the mixture, from E-step rounds alone. By Fisher's identity the score of the
observed-data log-likelihood is the expected complete-data score, a function of the E-step's sums: with the
weights ``pi = softmax(alpha)`` and each class's profile of variable q ``p_kq = softmax(gamma_kq)``,

    dL/dalpha_k = N_k - pi_k N,        dL/dgamma_kqm = N_kqm - p_kqm N_kq,

``N_k`` the expected rows of class k, ``N_kqm`` those of class k with modality m of variable q and
``N_kq = sum_m N_kqm`` those of class k observing variable q (a missing cell counts in none). The observed
information is minus the derivative of this score; it is computed by central differences of the score at
``2 D`` parameter points (``D`` free parameters), each one E-step round of every silo (the request EM already
sends). Missing values enter through ``N_kq``; classification uncertainty through the responsibilities'
dependence on the parameters (Louis' missing information, which the complete-data information
``p (1 - p) / N_kq`` leaves out).

Intervals: a probability inside (0, 1) gets the Wald interval on the logit scale, transformed back (never
outside [0, 1]); ``se`` is the delta-method standard error on the probability scale, as poLCA reports it. A
probability at the boundary (below ``BOUNDARY``: EM drives a modality no row of the class shows towards 0)
has no Wald interval (its information is degenerate); it gets the profile-likelihood interval ``[0, u]``, ``u``
where twice the drop of the log-likelihood maximised with that probability held at ``u`` reaches the
chi-square(1) 95% quantile (EM rounds with the probability held, docs/design.md §15.1), and ``se`` is left
empty.

Gaussian items (StepMix's ``gaussian_diag``, docs/design.md §17.5): each class's mean ``mu_kg`` and log variance
``log s2_kg`` of every item are free parameters too, with the scores of the E-step's Gaussian sums
``(N_kg, S1_kg, S2_kg)`` (a missing value in none),

    dL/dmu_kg = (S1_kg - N_kg mu_kg) / s2_kg,
    dL/dlog s2_kg = ((S2_kg - 2 mu_kg S1_kg + N_kg mu_kg^2) / s2_kg - N_kg) / 2,

so the probabilities' intervals account for the uncertainty of the means and variances, and the means get
standard errors of their own (``mean_se``, standardised units). Every E-step round is sent at the fit's Gaussian
parameters, and the profile likelihood's EM moves them as EM does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import expit

from vcmc.lca.em import Ask, EStepTotals, LcaFit, estep, m_step
from vcmc.model import profile_offsets

#: A modality probability below this (or its complement's) is at the boundary: profile interval, no Wald one.
BOUNDARY = 1e-6
#: Step of the central differences on the logit scale.
STEP = 1e-4
Z95 = float(stats.norm.ppf(0.975))
CHI2_95 = float(stats.chi2.ppf(0.95, 1))
#: Rounds of one constrained EM run of the profile likelihood, and its tolerance on the average log-likelihood.
PROFILE_ROUNDS = 200
PROFILE_TOL = 1e-9


@dataclass(frozen=True)
class ItemInformation:
    """Standard errors and 95% intervals of a fitted model's probabilities.

    ``se`` (K, P) delta-method standard errors of the item-response probabilities (NaN at the boundary);
    ``ci`` (K, P, 2) their intervals; ``interval`` (K, P) how each interval was made (``"wald-logit"``,
    ``"profile"``, ``"complete-data"``); ``weight_se`` (K,) and ``weight_ci`` (K, 2) the class weights';
    ``n_rounds`` the E-step rounds used; ``method`` in words; ``mean_se`` (K, G) the Gaussian items' means'
    standard errors in standardised units (None without Gaussian items; NaN where the observed information was
    not used).
    """

    se: np.ndarray
    ci: np.ndarray
    interval: np.ndarray
    weight_se: np.ndarray
    weight_ci: np.ndarray
    n_rounds: int
    method: str
    mean_se: np.ndarray | None = None


def _score(totals: EStepTotals, pi, profiles, free, gaussian=None) -> np.ndarray:
    """The observed-data score at the free parameters, from the E-step sums (Fisher's identity)."""
    out = np.empty(len(free))
    g = 0 if gaussian is None else gaussian.shape[1] // 2
    for j, f in enumerate(free):
        if f[0] == "w":
            k = f[1]
            out[j] = totals.cluster[k] - pi[k] * totals.n_rows
        elif f[0] in ("m", "v"):
            k, i = f[1], f[2]
            n, s1, s2 = totals.gaussian[k, i], totals.gaussian[k, g + i], totals.gaussian[k, 2 * g + i]
            mu, var = gaussian[k, i], gaussian[k, g + i]
            if f[0] == "m":
                out[j] = (s1 - n * mu) / var
            else:
                out[j] = 0.5 * ((s2 - 2.0 * mu * s1 + n * mu * mu) / var - n)
        else:
            k, lo, hi, col = f[1], f[2], f[3], f[4]
            n_kq = totals.modality[k, lo:hi].sum()
            out[j] = totals.modality[k, col] - profiles[k, col] * n_kq
    return out


def _point(fit: LcaFit, free, theta_shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Weights, profiles (and Gaussian parameters) with the free parameters shifted by ``theta_shift`` from the
    estimate (logits; the Gaussian items' means and log variances)."""
    log_pi = np.log(np.clip(fit.pi, 1e-300, None))
    log_prof = np.log(np.clip(fit.profiles, 1e-300, None))
    gauss = None if fit.gaussian is None else np.array(fit.gaussian, dtype=np.float64, copy=True)
    g = 0 if gauss is None else gauss.shape[1] // 2
    for j, f in enumerate(free):
        if theta_shift[j] == 0.0:
            continue
        if f[0] == "w":
            log_pi[f[1]] += theta_shift[j]
        elif f[0] == "m":
            gauss[f[1], f[2]] += theta_shift[j]
        elif f[0] == "v":
            gauss[f[1], g + f[2]] *= np.exp(theta_shift[j])
        else:
            log_prof[f[1], f[4]] += theta_shift[j]
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    prof = np.exp(log_prof)
    offsets = profile_offsets(fit.n_modalities)
    for q in range(len(fit.n_modalities)):
        sl = slice(offsets[q], offsets[q + 1])
        prof[:, sl] /= prof[:, sl].sum(axis=1, keepdims=True)
    return pi, prof, gauss


def free_parameters(fit: LcaFit) -> list[tuple]:
    """The logits that are free at the estimate: the weights of classes 2..K (class 1, the largest, is the
    reference) and, per class and variable, every modality but the most probable one whose probability is
    not at the boundary; with Gaussian items, every class's mean and log variance of each. Entries: ``("w", k)``,
    ``("p", k, lo, hi, column)``, ``("m", k, item)`` or ``("v", k, item)``."""
    offsets = profile_offsets(fit.n_modalities)
    free: list[tuple] = [("w", k) for k in range(1, fit.k)]
    for k in range(fit.k):
        for q in range(len(fit.n_modalities)):
            lo, hi = int(offsets[q]), int(offsets[q + 1])
            block = fit.profiles[k, lo:hi]
            ref = int(np.argmax(block))
            free += [("p", k, lo, hi, lo + m) for m in range(hi - lo) if m != ref and block[m] >= BOUNDARY]
    if fit.gaussian is not None:
        g = fit.gaussian.shape[1] // 2
        free += [(kind, k, i) for k in range(fit.k) for kind in ("m", "v") for i in range(g)]
    return free


def observed_information(call: Ask, names, fit: LcaFit, free) -> tuple[np.ndarray, int]:
    """Minus the derivative of the score at the estimate, by central differences (2 D E-step rounds)."""
    d = len(free)
    hess = np.zeros((d, d))
    for j in range(d):
        cols = []
        for sign in (1.0, -1.0):
            shift = np.zeros(d)
            shift[j] = sign * STEP
            pi, prof, gauss = _point(fit, free, shift)
            cols.append(_score(estep(call, names, pi, prof, gauss), pi, prof, free, gauss))
        hess[:, j] = (cols[0] - cols[1]) / (2 * STEP)
    return -0.5 * (hess + hess.T), 2 * d


def _held_em(call: Ask, names, fit: LcaFit, col: int, k: int, lo: int, hi: int, value: float) -> tuple[float, int]:
    """The log-likelihood maximised with ``profiles[k, col]`` held at ``value`` (EM from the estimate; the
    M-step of that class and variable gives the held modality ``value`` and shares ``1 - value`` among the
    others in proportion to their expected counts, the constrained maximiser), and the rounds used."""

    def hold(prof):
        prof = prof.copy()
        others = [c for c in range(lo, hi) if c != col]
        rest = prof[k, others].sum()
        prof[k, others] = (1.0 - value) * (prof[k, others] / rest if rest > 0 else 1.0 / len(others))
        prof[k, col] = value
        return prof

    from vcmc.lca.gaussian import gaussian_m_step

    pi, prof, gauss = fit.pi.copy(), hold(fit.profiles), fit.gaussian
    previous = -np.inf
    rounds = 0
    totals = None
    for _ in range(PROFILE_ROUNDS):
        totals = estep(call, names, pi, prof, gauss)
        rounds += 1
        avg = totals.loglik / max(totals.n_rows, 1)
        if abs(avg - previous) < PROFILE_TOL:
            break
        previous = avg
        pi, prof = m_step(totals, fit.n_modalities)
        prof = hold(prof)
        if gauss is not None:
            gauss = gaussian_m_step(totals.gaussian)
    return float(totals.loglik), rounds


def profile_upper(call: Ask, names, fit: LcaFit, k: int, lo: int, hi: int, col: int, n_kq: float) -> tuple[float, int]:
    """Upper end ``u`` of the profile-likelihood interval ``[0, u]`` of a probability at 0, and the rounds used."""
    rounds = 0

    def excess(u):
        nonlocal rounds
        ll, r = _held_em(call, names, fit, col, k, lo, hi, u)
        rounds += r
        return 2.0 * (fit.loglik - ll) - CHI2_95

    a = 0.0
    b = min(0.5, CHI2_95 / 2.0 / max(n_kq, 1.0))       # the binomial bound of a class of N_kq rows with no case
    fb = excess(b)
    while fb < 0 and b < 0.999:
        a, b = b, min(2 * b, 0.5 * (b + 1.0))
        fb = excess(b)
    if fb < 0:
        return 1.0, rounds
    u = optimize.brentq(excess, a, b, xtol=1e-4 * b, rtol=1e-6, maxiter=30)
    return float(u), rounds


def item_information(call: Ask, names, fit: LcaFit, *, profiles: bool = True, observed: bool = True) -> ItemInformation:
    """Standard errors and 95% intervals of the weights and item-response probabilities of ``fit``.

    ``profiles`` False skips the profile intervals of boundary probabilities (their ``ci`` is then the
    complete-data bound ``[0, 1 - exp(-chi2 / (2 N_kq))]``, the profile of a class with its members known).
    ``observed`` False skips the observed information (``2 D`` E-step rounds): the intervals are then the
    complete-data ones of each class's rows that observed the item, ``p (1 - p) / N_kq`` (one round).
    """
    free = free_parameters(fit)
    info, rounds = observed_information(call, names, fit, free) if observed else (None, 0)
    totals = estep(call, names, fit.pi, fit.profiles, fit.gaussian)
    rounds += 1
    method = "observed information (central differences of the E-step score), Wald intervals on the logit scale"
    try:
        cov = np.linalg.inv(info) if observed else None
        ok = observed and np.all(np.isfinite(cov)) and np.all(np.diag(cov) > 0)
    except np.linalg.LinAlgError:
        ok = False
    if not observed:
        method = ("complete-data information p (1 - p) / N_kq of each class's rows that observed the item "
                  "(asked for: the observed information was not computed)")
    elif not ok:        # not identified at the estimate (or replies rounded by a gate): the complete-data bound
        cov = None
        method = ("complete-data information p (1 - p) / N_kq: the observed information is not positive definite "
                  "at the estimate (a class not identified, or rounded replies)")
    index = {f: j for j, f in enumerate(free)}
    offsets = profile_offsets(fit.n_modalities)
    kk, p = fit.profiles.shape
    se = np.full((kk, p), np.nan)
    ci = np.zeros((kk, p, 2))
    kind = np.empty((kk, p), dtype=object)
    for k in range(kk):
        for q in range(len(fit.n_modalities)):
            lo, hi = int(offsets[q]), int(offsets[q + 1])
            block = fit.profiles[k, lo:hi]
            n_kq = float(totals.modality[k, lo:hi].sum())
            cols = [index.get(("p", k, lo, hi, lo + m)) for m in range(hi - lo)]
            boundary_mass = 0.0
            for m in range(hi - lo):
                c = lo + m
                if block[m] < BOUNDARY:
                    if profiles:
                        u, r = profile_upper(call, names, fit, k, lo, hi, c, n_kq)
                        rounds += r
                        kind[k, c] = "profile"
                    else:
                        u = 1.0 - np.exp(-CHI2_95 / 2.0 / max(n_kq, 1e-12))
                        kind[k, c] = "complete-data"
                    ci[k, c] = (0.0, min(u, 1.0))
                    boundary_mass += ci[k, c, 1]
            for m in range(hi - lo):
                c = lo + m
                if block[m] < BOUNDARY:
                    continue
                pm = float(block[m])
                if cov is not None:
                    jac = np.zeros(len(free))      # d p_m / d gamma_j = p_m (1[m = j] - p_j) over the free j
                    for mm, j in enumerate(cols):
                        if j is not None:
                            jac[j] = pm * ((1.0 if mm == m else 0.0) - float(block[mm]))
                    var = float(jac @ cov @ jac)
                    kind[k, c] = "wald-logit"
                else:
                    var = pm * (1 - pm) / max(n_kq, 1e-12)
                    kind[k, c] = "complete-data"
                se[k, c] = np.sqrt(max(var, 0.0))
                if pm > 1 - BOUNDARY:        # every other modality at the boundary: [1 - their upper ends, 1]
                    ci[k, c] = (max(0.0, 1.0 - boundary_mass), 1.0)
                    se[k, c] = np.nan
                    kind[k, c] = "profile" if profiles else "complete-data"
                else:
                    ci[k, c] = _logit_interval(pm, se[k, c])
    pi = fit.pi
    w_se = np.full(kk, np.nan)
    w_ci = np.zeros((kk, 2))
    for k in range(kk):
        if cov is not None:
            jac = np.zeros(len(free))
            for kk2 in range(1, kk):
                jac[index[("w", kk2)]] = pi[k] * ((1.0 if kk2 == k else 0.0) - pi[kk2])
            w_se[k] = np.sqrt(max(float(jac @ cov @ jac), 0.0))
        else:
            w_se[k] = np.sqrt(pi[k] * (1 - pi[k]) / max(fit.n_rows, 1))
        w_ci[k] = _logit_interval(float(pi[k]), w_se[k]) if 0 < pi[k] < 1 else (pi[k], pi[k])
    mean_se = None
    if fit.gaussian is not None:
        g = fit.gaussian.shape[1] // 2
        mean_se = np.full((kk, g), np.nan)
        if cov is not None:
            for k in range(kk):
                for i in range(g):
                    mean_se[k, i] = np.sqrt(max(float(cov[index[("m", k, i)], index[("m", k, i)]]), 0.0))
    return ItemInformation(se=se, ci=ci, interval=kind, weight_se=w_se, weight_ci=w_ci, n_rounds=rounds,
                           method=method, mean_se=mean_se)


def _logit_interval(p: float, se: float) -> tuple[float, float]:
    """``expit(logit(p) -/+ z se / (p (1 - p)))``: the delta method's Wald interval on the logit scale."""
    if not np.isfinite(se):
        return (np.nan, np.nan)
    lam = np.log(p / (1 - p))
    s = se / (p * (1 - p))
    return (float(expit(lam - Z95 * s)), float(expit(lam + Z95 * s)))
