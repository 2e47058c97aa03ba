"""The Gibbs block of a model with Gaussian items beside the categorical ones (docs/design.md §17.3).

One component's parameters are the flat row ``(p, mu, sigma2)``: the categorical profile (``P`` columns, as in the
other kernels), then the ``G`` means and the ``G`` variances of the Gaussian items (``vcmc.family``). Every row is
unique once it holds a measurement, so the grouped tables of the dense path and the shared patterns of the sparse
path buy nothing here: the allocation step works row by row in float64 log space (a log table of the profiles per
sweep, then per row and component the categorical terms and the Gaussian terms, one exponential per component).
The weights and profiles are drawn by the shared ``_draw_parameters``; the means and variances from their
normal-inverse-gamma conditionals (``_draw_gaussian``, the family's ``vcmc.family.gaussian.posterior_parameters``).
A missing categorical cell points at a row of zeros of the log table; a missing measurement (``NaN``) is skipped.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vcmc.dirichlet import _gamma_ge1, _std_exponential, _std_normal
from vcmc.mcmc.sampler.draws import _draw_parameters, _keep_draw

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True, inline="always")
def _add_row(gstat, x, i, k):
    """Row ``i``'s observed measurements into component ``k``'s counts, sums and sums of squares."""
    n_items = x.shape[1]
    for g in range(n_items):
        v = x[i, g]
        if v == v:
            gstat[k, g] += 1.0
            gstat[k, n_items + g] += v
            gstat[k, 2 * n_items + g] += v * v


@njit(cache=True)
def _gaussian_stats(x, z, gstat):
    """Observed rows, sums and sums of squares of every (component, item): ``gstat`` (C, 3G), zeroed here."""
    gstat[:, :] = 0.0
    for i in range(x.shape[0]):
        _add_row(gstat, x, i, z[i])


@njit(cache=True)
def _keep_mixed(s, nc, ct, gstat, pi, logpi, prof, logprof, alpha, beta, offsets, const, gprior, keep_pi, keep_prof,
                keep_nocc, keep_lp):
    """Store kept draw ``s``: the shared record, plus the Gaussian items' part of the log joint."""
    _keep_draw(s, nc, ct, pi, logpi, prof, logprof, alpha, beta, offsets, const, keep_pi, keep_prof, keep_nocc,
               keep_lp)
    keep_lp[s] += _gaussian_log_joint(gstat, prof, offsets[offsets.shape[0] - 1], gprior)


# error_model="numpy" as in _draw_parameters: every divisor is a positive shape, precision or Gamma draw
@njit(cache=True, error_model="numpy")
def _draw_gaussian(gstat, gprior, prof, p0, rng):
    """Means and variances from their normal-inverse-gamma conditionals given ``gstat`` into ``prof[:, p0:]``."""
    n_items = gstat.shape[1] // 3
    m0, kappa, a, b = gprior[0], gprior[1], gprior[2], gprior[3]
    for c in range(prof.shape[0]):
        for g in range(n_items):
            n = gstat[c, g]
            kn = kappa + n
            mn = (kappa * m0 + gstat[c, n_items + g]) / kn
            an = a + 0.5 * n
            bn = b + 0.5 * max(gstat[c, 2 * n_items + g] + kappa * m0 * m0 - kn * mn * mn, 0.0)
            gam = (_gamma_ge1(an + 1.0, rng) * math.exp(-_std_exponential(rng) / an) if an < 1.0
                   else _gamma_ge1(an, rng))
            var = bn / gam
            prof[c, p0 + n_items + g] = var
            prof[c, p0 + g] = mn + math.sqrt(var / kn) * _std_normal(rng)


@njit(cache=True)
def _gaussian_log_joint(gstat, prof, p0, gprior):
    """The Gaussian items' part of ``log p(X, z, theta)``: their likelihood and normal-inverse-gamma prior."""
    n_items = gstat.shape[1] // 3
    m0, kappa, a, b = gprior[0], gprior[1], gprior[2], gprior[3]
    lp = 0.0
    for c in range(prof.shape[0]):
        for g in range(n_items):
            mu = prof[c, p0 + g]
            var = prof[c, p0 + n_items + g]
            lv = math.log(var)
            n, s, ss = gstat[c, g], gstat[c, n_items + g], gstat[c, 2 * n_items + g]
            lp += -0.5 * n * (_LOG_2PI + lv) - (ss - 2.0 * mu * s + n * mu * mu) / (2.0 * var)
            lp += (-0.5 * (_LOG_2PI + lv - math.log(kappa)) - kappa * (mu - m0) ** 2 / (2.0 * var)
                   + a * math.log(b) - math.lgamma(a) - (a + 1.0) * lv - b / var)
    return lp


@njit(cache=True)
def _gibbs_block_mixed(pidx, x, z, pi, logpi, prof, logprof, alpha, beta, offsets, const, gprior, n_iter,
                       first_iter, burn_in, thin, keep_z, keep_pi, keep_prof, keep_nocc, keep_lp, keep_at, rng):
    """Run ``n_iter`` Gibbs iterations in place; store kept ones from index ``keep_at``; return #kept.

    ``pidx`` (n, Q): per row and variable the profile column ``offsets[q] + x`` or ``P + q`` if missing; ``x``
    (n, G): the standardised measurements, ``NaN`` if missing; ``gprior``: ``(m0, kappa, a, b)`` after
    fractionation.
    """
    n, n_var = pidx.shape
    n_items = x.shape[1]
    n_comp = pi.shape[0]
    n_col = offsets[n_var]
    ltab = np.zeros((n_col + n_var, n_comp))      # rows P.. (missing) stay 0
    mu_t = np.empty((n_items, n_comp))
    half_prec = np.empty((n_items, n_comp))
    norm_t = np.empty((n_items, n_comp))
    lw = np.empty(n_comp)
    nc = np.zeros(n_comp, dtype=np.int64)
    ct = np.zeros((n_col + n_var, n_comp), dtype=np.int64)
    gstat = np.zeros((n_comp, 3 * n_items))
    shp = np.empty(max(n_comp, n_col))
    n_kept = 0
    for it in range(first_iter, first_iter + n_iter):
        for c in range(n_comp):
            for j in range(n_col):
                ltab[j, c] = math.log(prof[c, j])
            for g in range(n_items):
                var = prof[c, n_col + n_items + g]
                mu_t[g, c] = prof[c, n_col + g]
                half_prec[g, c] = 0.5 / var
                norm_t[g, c] = -0.5 * (_LOG_2PI + math.log(var))
        # ---- 1. allocations, row by row
        nc[:] = 0
        ct[:, :] = 0
        gstat[:, :] = 0.0
        for i in range(n):
            for c in range(n_comp):
                lw[c] = logpi[c]
            for q in range(n_var):
                row = pidx[i, q]
                for c in range(n_comp):
                    lw[c] += ltab[row, c]
            for g in range(n_items):
                v = x[i, g]
                if v == v:
                    for c in range(n_comp):
                        d = v - mu_t[g, c]
                        lw[c] += norm_t[g, c] - half_prec[g, c] * d * d
            top = lw.max()
            acc = 0.0                  # lw becomes the running total; the first total above the uniform wins
            for c in range(n_comp):
                acc += math.exp(lw[c] - top)
                lw[c] = acc
            k = min(np.searchsorted(lw, rng.random() * acc, side="right"), n_comp - 1)
            z[i] = k
            nc[k] += 1
            for q in range(n_var):
                ct[pidx[i, q], k] += 1
            _add_row(gstat, x, i, k)
        # ---- 2-3. means and variances, weights and profiles given the allocations (independent given them)
        _draw_gaussian(gstat, gprior, prof, n_col, rng)
        keep = it >= burn_in and (it - burn_in) % thin == thin - 1
        _draw_parameters(nc, ct, alpha, beta, offsets, shp, pi, logpi, prof, logprof, keep, rng)
        if not keep:
            continue
        _keep_mixed(keep_at + n_kept, nc, ct, gstat, pi, logpi, prof, logprof, alpha, beta, offsets, const, gprior,
                    keep_pi, keep_prof, keep_nocc, keep_lp)
        keep_z[n_kept] = z
        n_kept += 1
    return n_kept
