"""Maximum-likelihood latent class model of fixed K by federated EM rounds (docs/design.md §15.1).

Each round the server sends one parameter point ``(pi, profiles)`` to every silo (``LcaEStepRequest``);
each silo returns whole-silo sums (expected cluster counts, expected modality counts per cluster, the
log-likelihood and the entropy of its rows' memberships); the M-step on the summed counts is exactly the
pooled M-step, so the federated fit is the pooled fit. Several random starts; the best log-likelihood wins.
Conventions are StepMix's (``measurement="categorical_nan"``): missing cells contribute nothing to the
likelihood and each variable's profile is normalised over the rows that observed it; probabilities are
clipped to [1e-15, 1 - 1e-15] inside logarithms; EM stops when the average log-likelihood changes by
less than ``tol`` (StepMix's ``abs_tol = 1e-10``) or after ``max_iter`` rounds. Gaussian items beside the
categorical ones are StepMix's ``gaussian_diag`` (``vcmc.lca.gaussian``; docs/design.md §17).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from vcmc._rng import RngLike, as_generator
from vcmc.exceptions import ConfigError, SiloFailure
from vcmc.model import profile_offsets
from vcmc.protocol import Message
from vcmc.protocol.lca import LcaEStepReply, LcaEStepRequest

Ask = Callable[[Mapping[str, Message]], Mapping[str, Message]]

PARAMETER_TOL = 1e-6
"""Largest change of a weight, profile probability (or a Gaussian item's standardised mean or variance) under
which EM has converged when the log-likelihood summed over the silos did not change at all (the silos sent it on
a grid, docs/design.md §13)."""


def _moved(old, new) -> float:
    """The largest absolute change of any parameter between two points ``(pi, profiles[, gaussian])``."""
    return float(max(np.max(np.abs(np.asarray(a) - np.asarray(b))) for a, b in zip(old, new, strict=True)))


#: Starts that must reach the best log-likelihood before EM stops adding starts (docs/design.md §15.1).
DEFAULT_MIN_BEST = 2
#: At most this many times ``n_starts`` starts in all.
MAX_STARTS_FACTOR = 10


def ask_all(call: Ask, names, request: Message) -> dict[str, Message]:
    """Send the same request to every silo; a failed silo stops the analysis (its reason is said)."""
    replies = call({n: request for n in names})
    failed = {n: r for n, r in replies.items() if isinstance(r, SiloFailure | Exception)}
    if failed:
        raise ConfigError("latent class analysis: " + "; ".join(f"silo {n!r} failed: {r}" for n, r in
                                                                 failed.items()))
    return dict(replies)


@dataclass(frozen=True)
class EStepTotals:
    """The silos' E-step sums added up."""

    n_rows: int
    cluster: np.ndarray
    modality: np.ndarray
    loglik: float
    entropy: float
    at_gaussian: np.ndarray | None = None
    """The Gaussian parameters (K, 2G) the sums were computed at; ``gaussian`` the sums (K, 3G)."""
    gaussian: np.ndarray | None = None


def estep(call: Ask, names, pi, profiles, gaussian=None) -> EStepTotals:
    """One federated E-step round at ``(pi, profiles)`` (and the Gaussian items' ``gaussian``, (K, 2G)); the
    silos' sums added in the silos' order."""
    request = LcaEStepRequest(pi=np.asarray(pi, float), profiles=np.asarray(profiles, float),
                              gaussian=None if gaussian is None else np.asarray(gaussian, float))
    replies = ask_all(call, names, request)
    reps: list[LcaEStepReply] = [replies[n] for n in names]
    return EStepTotals(n_rows=sum(int(r.n_rows) for r in reps),
                       cluster=np.sum([np.asarray(r.cluster) for r in reps], axis=0),
                       modality=np.sum([np.asarray(r.modality) for r in reps], axis=0),
                       loglik=float(sum(float(r.loglik) for r in reps)),
                       entropy=float(sum(float(r.entropy) for r in reps)),
                       gaussian=None if gaussian is None else np.sum([np.asarray(r.gaussian) for r in reps], axis=0),
                       at_gaussian=None if gaussian is None else np.asarray(gaussian, float))


def m_step(totals: EStepTotals, n_modalities) -> tuple[np.ndarray, np.ndarray]:
    """Weights and profiles from summed expected counts (StepMix's MultinoulliNan M-step).

    A variable's profile is divided by the class's expected count among the rows that observed it (the
    sum of its block of expected modality counts); a class with no weight on a variable keeps a uniform
    profile there.
    """
    offsets = profile_offsets(n_modalities)
    pi = totals.cluster / max(totals.n_rows, 1)
    profiles = np.empty_like(totals.modality)
    for q in range(len(offsets) - 1):
        block = totals.modality[:, offsets[q]:offsets[q + 1]]
        denom = block.sum(axis=1, keepdims=True)
        width = offsets[q + 1] - offsets[q]
        profiles[:, offsets[q]:offsets[q + 1]] = np.where(denom > 0, block / np.where(denom > 0, denom, 1),
                                                          1.0 / width)
    return pi, profiles


def random_start(k: int, n_modalities, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Equal weights and profiles drawn from a flat Dirichlet per class and variable."""
    profiles = np.hstack([rng.dirichlet(np.ones(int(m)), size=k) for m in n_modalities])
    return np.full(k, 1.0 / k), profiles


@dataclass(frozen=True)
class LcaFit:
    """A fitted K-class model: classes ordered by decreasing weight.

    ``loglik`` and ``entropy`` are at the final parameters (sums over every row of every silo);
    ``start_logliks`` the final log-likelihood of each start; ``n_rounds`` every E-step round sent;
    ``n_best`` how many starts reached the best log-likelihood (within ``best_tolerance``).
    """

    k: int
    pi: np.ndarray
    profiles: np.ndarray
    n_modalities: tuple[int, ...]
    n_rows: int
    loglik: float
    entropy: float
    n_iter: int
    converged: bool
    start_logliks: tuple[float, ...]
    n_rounds: int
    statistics: dict = field(default_factory=dict)
    n_best: int = 1
    best_tolerance: float = 0.0
    gaussian: np.ndarray | None = None
    """(K, 2G): the Gaussian items' means, then variances, standardised (None without them)."""


def run_em(call: Ask, names, n_modalities, pi, profiles, *, max_iter: int = 1000,
           tol: float = 1e-10, gaussian=None) -> tuple[np.ndarray, np.ndarray, EStepTotals, int, bool, int]:
    """EM from ``(pi, profiles)`` (and ``gaussian``) until the average log-likelihood changes by less than
    ``tol``; the final Gaussian parameters are the returned totals' ``at_gaussian``."""
    from vcmc.lca.gaussian import gaussian_m_step

    previous = -np.inf
    rounds = 0
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the number of rounds run is reported
        totals = estep(call, names, pi, profiles, gaussian)
        rounds += 1
        avg = totals.loglik / max(totals.n_rows, 1)
        old = (pi, profiles)
        pi, profiles = m_step(totals, n_modalities)
        if gaussian is not None:
            old = (*old, gaussian)
            gaussian = gaussian_m_step(totals.gaussian)
        new = (pi, profiles) if gaussian is None else (pi, profiles, gaussian)
        # a deployment's silos send the log-likelihood on a grid (docs/design.md §13): an unchanged sum there
        # says nothing of convergence, so EM goes on while the parameters still move
        if abs(avg - previous) < tol and (avg != previous or _moved(old, new) < PARAMETER_TOL):
            converged = True
            break
        previous = avg
    final = estep(call, names, pi, profiles, gaussian)
    return pi, profiles, final, it, converged, rounds + 1


#: Starts whose final log-likelihoods differ by less than this (absolute, or relative to the best) reached the
#: same maximum: EM stops when the average log-likelihood changes by 1e-10, so the finals of one maximum agree
#: to about 1e-6 at 10,000 rows, while distinct local maxima differ by tenths (docs/design.md §15.1).
SAME_MAXIMUM = (1e-4, 1e-8)


def best_count(logliks, best: float) -> int:
    """How many starts reached ``best`` (within ``SAME_MAXIMUM``)."""
    tol = max(SAME_MAXIMUM[0], SAME_MAXIMUM[1] * abs(best))
    return int(sum(1 for v in logliks if v >= best - tol))


def fit_lca(call: Ask, names, n_modalities, k: int, *, n_starts: int = 10, max_iter: int = 1000,
            tol: float = 1e-10, rng: RngLike = None, min_best: int | None = None,
            max_starts: int | None = None, n_gaussian: int = 0) -> LcaFit:
    """Best of ``n_starts`` (or more) federated EM runs of the K-class model.

    After the first ``n_starts`` starts, more are made until ``min_best`` of them (default 2) reached the best
    log-likelihood, at most ``max_starts`` in all (default ``MAX_STARTS_FACTOR`` times ``n_starts``): a
    maximum that one start in ten reaches may not be the global one (docs/design.md §15.1). ``min_best = 1``
    gives exactly ``n_starts`` starts, StepMix's ``n_init``.

    Parameters
    ----------
    call : callable
        ``Transport.call``: a mapping of silo name to request -> a mapping of silo name to reply.
    names : sequence of str
        The silos, in the server's order (sums are added in this order).
    n_modalities : sequence of int
    k : int
        Number of classes (>= 1).
    n_starts, max_iter, tol : EM settings (StepMix's ``n_init``, ``max_iter``, ``abs_tol``).
    rng : seed or Generator
        Draws the starts; same seed, same fit.
    min_best, max_starts : int
        Starts are added until ``min_best`` reached the best value, at most ``max_starts`` in all.
    n_gaussian : int
        G, the silos' Gaussian items (``gaussian_diag``; their start ``vcmc.lca.gaussian.random_gaussian_start``).
    """
    from vcmc.lca.gaussian import random_gaussian_start

    min_best = DEFAULT_MIN_BEST if min_best is None else int(min_best)
    max_starts = MAX_STARTS_FACTOR * int(n_starts) if max_starts is None else int(max_starts)
    if int(k) < 1 or int(n_starts) < 1 or min_best < 1 or max_starts < int(n_starts):
        raise ConfigError(f"the latent class model needs k >= 1, n_starts >= 1, min_best >= 1 and max_starts >= "
                          f"n_starts; got k={k}, n_starts={n_starts}, min_best={min_best}, max_starts={max_starts}")
    gen = as_generator(rng)
    n_modalities = tuple(int(m) for m in n_modalities)
    best = None
    logliks: list[float] = []
    rounds = 0
    limit = 1 if k == 1 else max_starts
    while len(logliks) < limit:
        if len(logliks) >= (1 if k == 1 else int(n_starts)) and best_count(logliks, best[2].loglik) >= min_best:
            break
        pi0, prof0 = random_start(int(k), n_modalities, gen)
        gauss0 = random_gaussian_start(int(k), int(n_gaussian), gen) if n_gaussian else None
        pi, prof, totals, it, conv, r = run_em(call, names, n_modalities, pi0, prof0, max_iter=max_iter, tol=tol,
                                               gaussian=gauss0)
        rounds += r
        logliks.append(totals.loglik)
        if best is None or totals.loglik > best[2].loglik:
            best = (pi, prof, totals, it, conv)
    pi, prof, totals, it, conv = best
    order = np.argsort(-pi, kind="stable")
    from vcmc.lca.statistics import fit_statistics

    stats = fit_statistics(totals.loglik, n_parameters(int(k), n_modalities, int(n_gaussian)), totals.n_rows,
                           totals.entropy, int(k))
    return LcaFit(k=int(k), pi=pi[order], profiles=prof[order], n_modalities=n_modalities, n_rows=totals.n_rows,
                  loglik=totals.loglik, entropy=totals.entropy, n_iter=it, converged=conv,
                  start_logliks=tuple(logliks), n_rounds=rounds, statistics=stats,
                  n_best=best_count(logliks, totals.loglik),
                  best_tolerance=max(SAME_MAXIMUM[0], SAME_MAXIMUM[1] * abs(totals.loglik)),
                  gaussian=None if totals.at_gaussian is None else totals.at_gaussian[order])


def n_parameters(k: int, n_modalities, n_gaussian: int = 0) -> int:
    """Free parameters of the K-class model: K-1 weights, K x sum_q (M_q - 1) profile probabilities and K x 2G
    means and variances of the Gaussian items."""
    return int((k - 1) + k * sum(int(m) - 1 for m in n_modalities) + 2 * k * int(n_gaussian))


def point_fit(call: Ask, names, n_modalities, pi, profiles) -> LcaFit:
    """The statistics of a given parameter point (e.g. the Bayesian fit's posterior mean at its K): one round."""
    n_modalities = tuple(int(m) for m in n_modalities)
    pi = np.asarray(pi, dtype=np.float64)
    pi = pi / pi.sum()
    profiles = np.asarray(profiles, dtype=np.float64)
    totals = estep(call, names, pi, profiles)
    from vcmc.lca.statistics import fit_statistics

    k = int(pi.size)
    stats = fit_statistics(totals.loglik, n_parameters(k, n_modalities), totals.n_rows, totals.entropy, k)
    return LcaFit(k=k, pi=pi, profiles=profiles, n_modalities=n_modalities, n_rows=totals.n_rows,
                  loglik=totals.loglik, entropy=totals.entropy, n_iter=0, converged=True, start_logliks=(),
                  n_rounds=1, statistics=stats)
