"""Checks of server-chosen arrays for the gate (``vcmc.silo.gate``): shapes, caps, finite probabilities.

Every message names only the request, the field, shapes and limits, never a value of the data, so the
text may cross the boundary (``ConfigError``/``DisclosureError`` are vetted in ``vcmc.silo.errors``).
"""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.model import profile_offsets

_SUM_TOL = 1e-6


def cap(what: str, *, clusters: int | None = None, max_clusters: int = 0, draws: int | None = None,
        max_draws: int = 0) -> None:
    """Shape caps of the operator's policy."""
    if clusters is not None and not 1 <= int(clusters) <= int(max_clusters):
        raise ConfigError(f"{what}: the number of clusters must be in [1, {max_clusters}]; got {clusters}")
    if draws is not None and not 1 <= int(draws) <= int(max_draws):
        raise ConfigError(f"{what}: the number of draws must be in [1, {max_draws}]; got {draws}")


def _finite_array(what: str, value, ndim: int) -> np.ndarray:
    if value is None:
        raise ConfigError(f"{what} is missing")
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise ConfigError(f"{what} must be numbers; got dtype {a.dtype.str}")
    a = a.astype(np.float64)
    if a.ndim != ndim:
        raise ConfigError(f"{what} must have {ndim} dimensions; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ConfigError(f"{what} must be finite (no NaN or infinity)")
    if np.any(a < 0) or np.any(a > 1 + 1e-9):
        raise ConfigError(f"{what} must be probabilities in [0, 1]")
    return a


def probabilities(what: str, value, *, ndim: int, floor: float, sums_to_one: bool) -> np.ndarray:
    """Finite probabilities of the given rank whose last axis sums to 1 (weights)."""
    a = _finite_array(what, value, ndim)
    if sums_to_one and a.size and np.any(np.abs(a.sum(axis=-1) - 1.0) > _SUM_TOL):
        raise ConfigError(f"{what}: each row must sum to 1")
    return np.maximum(a, floor) if floor > 0 else a


def profiles(what: str, value, shape: tuple, n_modalities, *, floor: float) -> np.ndarray:
    """Finite profile draws of ``shape`` (None: any length), each variable's block summing to 1, raised to
    at least ``floor`` (so that no row can be given likelihood 0: a server cannot single out a pattern by
    zeros). An honest draw is left unchanged: its entries are above the floor (checked on the demo)."""
    a = _finite_array(what, value, len(shape))
    if any(want is not None and int(want) != got for want, got in zip(shape, a.shape, strict=True)):
        raise ConfigError(f"{what} must have shape {tuple('any' if s is None else int(s) for s in shape)}; got "
                          f"{a.shape}")
    # (blocks need not sum to 1 exactly: per-coordinate medians are accepted as profiles; what protects the
    # rows is the floor here and, for announced draws, the consistency check)
    if floor > 0 and a.size and np.any(a < floor):
        a = np.maximum(a, floor)
    return a


def kept_profiles(log_profiles, keep, n_modalities, *, floor: float) -> np.ndarray:
    """The profiles of components ``keep`` of the rounds' draws ``log_profiles`` (R, C, P), each variable's
    block renormalised (exp of a log draw sums to 1 within rounding), raised to at least ``floor``: what a
    ``RoundAssessRequest`` is assessed at and released by (``vcmc.silo.gate``, ``LocalSilo``)."""
    from vcmc.model import kept_component_profiles

    prof = kept_component_profiles(log_profiles, keep, n_modalities)
    return profiles("round assess profiles", prof, (None, None, prof.shape[2]), n_modalities, floor=floor)


def assignment(what: str, value, n_local: int, n_global: int) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind not in "iu" or a.shape != (int(n_local),) or (a.size and (a.min() < 0 or a.max() >= n_global)):
        raise ConfigError(f"{what}: the assignment must map the silo's {n_local} local clusters to global "
                          f"clusters in [0, {n_global}); got shape {a.shape}")
    return a.astype(np.int64)


def check_weights_are_the_silos(pi: np.ndarray, sent_pi: np.ndarray, assignment: np.ndarray, n_global: int, *,
                                silo: str) -> None:
    """Every announced weight draw is one of the draws the silo sent, mapped through the matching (as the
    server's ``build_matched_draws`` computes them): the server cannot choose the weights."""
    mapped = np.zeros((sent_pi.shape[0], n_global))
    np.add.at(mapped.T, assignment, np.asarray(sent_pi, dtype=np.float64).T)
    exact = {r.tobytes() for r in np.ascontiguousarray(mapped)}
    for row in np.ascontiguousarray(pi):
        if row.tobytes() in exact:
            continue
        if not np.any(np.all(np.abs(mapped - row[None]) <= 1e-9, axis=1)):
            raise DisclosureError(f"silo {silo!r}: an announced weight draw is not one of the silo's own draws "
                                  "mapped through the announced matching")


def sent_profile_spread(profile_draws: np.ndarray, n_modalities) -> tuple[np.ndarray, np.ndarray]:
    """The mean (K, P) of the profile draws a silo sent and, per cluster and variable (K, Q), the largest total
    variation of a sent draw from that mean (how far the silo's own message lets a draw of it lie)."""
    draws = np.asarray(profile_draws, dtype=np.float64)                         # (T, K, P)
    offsets = profile_offsets(n_modalities)
    mean = draws.mean(axis=0)
    radius = (0.5 * np.add.reduceat(np.abs(draws - mean[None]), offsets[:-1], axis=-1)).max(axis=0)
    return mean, radius


def check_profiles_near_the_silos(profiles: np.ndarray, sent_profiles: np.ndarray, sent_radius: np.ndarray,
                                  sizes: np.ndarray, assignment: np.ndarray, n_modalities, *, tolerance: float,
                                  silo: str) -> None:
    """Every announced profile draw of a global cluster that this silo's clusters are mapped to lies near the
    mean of the profile draws the silo *sent* of those clusters (``sent_profiles``, (K, P), size-weighted over
    the clusters mapped together): within ``tolerance`` (total variation, per variable) or, where the sent
    draws themselves scatter farther (``sent_radius``, (K, Q), from ``sent_profile_spread``), within their
    spread. So the server cannot replace them by profiles that single out a pattern. The reference is what was
    sent, not the silo's own posterior: under suppression or rounding the sent draws are those of the protected
    table, and the server's honest global draws are built from them."""
    offsets = profile_offsets(n_modalities)
    own = np.asarray(sent_profiles, dtype=np.float64)                            # (K, P)
    spread = np.asarray(sent_radius, dtype=np.float64)                           # (K, Q)
    sizes = np.asarray(sizes, dtype=np.float64)
    for c in np.unique(assignment):
        members = assignment == c
        ref = (sizes[members, None] * own[members]).sum(axis=0) / sizes[members].sum()
        allowed = np.maximum(float(tolerance), spread[members].max(axis=0))      # (Q,)
        diff = np.abs(profiles[:, c, :] - ref[None])                               # (T, P)
        tv = 0.5 * np.add.reduceat(diff, offsets[:-1], axis=-1)                    # (T, Q)
        if np.any(tv > allowed[None] + 1e-12):
            raise DisclosureError(f"silo {silo!r}: an announced profile draw of global cluster {int(c)} is "
                                  f"farther than {tolerance:g} (total variation, or the spread of the silo's "
                                  "sent draws) from the silo's own profile of the clusters mapped to it")


def share_suppressed_mass(table: np.ndarray, sizes: np.ndarray | None, n_modalities) -> np.ndarray:
    """The protected table with the people its suppression (or rounding) took out of each variable put back,
    evenly, into that variable's empty cells: ``size - sum(cells)`` of a cluster is known to the receiver
    (the cluster sizes are sent), so this uses nothing but what the message carries and gives back no cell.

    Without it a suppressed cell would be read as "nobody" and the profiles drawn from the table would be
    biased towards the cells that were kept (a block 15/0/0 of a cluster of 25 read as 94 % instead of 60 %),
    which misleads the server's matching. Where a variable has missing values in the cluster its observed
    people are fewer than the size, and part of the mass put back stands for them: an approximation, in the
    direction of the prior.
    """
    t = np.maximum(np.asarray(table, dtype=np.float64), 0.0)
    if sizes is None:
        return t
    offsets = profile_offsets(n_modalities)
    width = np.diff(offsets)
    sums = np.add.reduceat(t, offsets[:-1], axis=-1)                              # (K, Q)
    empty = np.add.reduceat((t <= 0).astype(np.float64), offsets[:-1], axis=-1)   # (K, Q)
    missing = np.maximum(np.asarray(sizes, dtype=np.float64)[:, None] - sums, 0.0)
    share = np.where(empty > 0, missing / np.maximum(empty, 1.0), 0.0)
    return np.where(t <= 0, np.repeat(share, width, axis=-1), t)


def estimate_from_table(table: np.ndarray, n_modalities, beta: float, sizes: np.ndarray | None = None) -> np.ndarray:
    """Posterior-mean profiles from a (protected) cluster-by-modality table with the Dirichlet(beta) prior (the
    suppressed people put back evenly where ``sizes`` is given, ``share_suppressed_mass``)."""
    t = share_suppressed_mass(table, sizes, n_modalities) + float(beta)
    offsets = profile_offsets(n_modalities)
    sums = np.add.reduceat(t, offsets[:-1], axis=-1)
    return t / np.repeat(sums, np.diff(offsets), axis=-1)


def draws_from_table(table: np.ndarray, n_modalities, beta: float, n_draws: int,
                     rng: np.random.Generator, sizes: np.ndarray | None = None) -> np.ndarray:
    """``n_draws`` profile draws of every cluster from Dirichlet(beta + table), variable by variable (the
    suppressed people put back evenly where ``sizes`` is given, ``share_suppressed_mass``).

    With the operator's suppression, rounding or noise set, the profile draws a silo sends are these: draws
    of its own posterior (the sampler's) would give back the unprotected cells to within about one person
    (their mean is (beta + n) / (beta K + N)), undoing the protection of the table in the same message. These
    are conditional on the silo's modal partition, so they carry no allocation uncertainty (docs/federation.md).
    """
    t = share_suppressed_mass(table, sizes, n_modalities) + float(beta)
    offsets = profile_offsets(n_modalities)
    g = rng.standard_gamma(np.broadcast_to(t, (int(n_draws), *t.shape)))
    sums = np.add.reduceat(g, offsets[:-1], axis=-1)
    return g / np.repeat(sums, np.diff(offsets), axis=-1)
