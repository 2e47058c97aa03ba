"""Assess: predictive checks, WAIC sums and sampled occupancy under the global draws (docs/design.md §14):
whole-silo sums, suppressed and rounded like every count, the WAIC sums rounded to a grid where counts are
rounded, refused under DP (its sums are not noised)."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.model import profile_offsets
from vcmc.protocol import AssessReply, AssessRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.endpoints.announce import check_draws, require_announced
from vcmc.silo.gaussian import check_requested
from vcmc.silo.release import protect_vector


def refuse_under_dp(gate) -> None:
    if gate.privacy.dp_epsilon is not None:
        raise DisclosureError(f"silo {gate.silo.name!r} does not take part in model assessment under "
                              "differential privacy (its whole-silo sums are not noised)")


def check_terms(gate, what: str, pi, pairs, spawn_key) -> np.ndarray:
    """The checks an assess and a round assess request share: weights probabilities, at most ``max_pairs``
    integer pairs, a short spawn key. Returns the weights."""
    pi = rc.probabilities(f"{what} pi", pi, ndim=2, floor=0.0, sums_to_one=True)
    pairs = np.asarray(pairs)
    if pairs.size and (pairs.dtype.kind not in "iu" or pairs.reshape(-1, 2).shape[0] > gate.policy.max_pairs):
        raise ConfigError(f"{what}: pairs must be at most {gate.policy.max_pairs} pairs of integer columns")
    if len(spawn_key) > 16:
        raise ConfigError(f"{what}: the spawn key must be at most 16 numbers")
    return pi


def admit(gate, request: AssessRequest) -> AssessRequest:
    refuse_under_dp(gate)
    announced = require_announced(gate, "assess")
    pi = np.asarray(request.pi, dtype=np.float64)
    profiles = np.asarray(request.profiles, dtype=np.float64)
    check_draws(gate, "assess", pi, profiles, announced=announced)
    pi = check_terms(gate, "assess", pi, request.pairs, request.spawn_key)
    prof = rc.profiles("assess profiles", profiles, (pi.shape[0], pi.shape[1], gate.silo.n_columns),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    gaussian = check_requested(gate, request, "assess", pi.shape[0], announced)
    return dataclasses.replace(request, profiles=prof, gaussian=gaussian)


def answer(silo, request: AssessRequest) -> AssessReply:
    """Everything returned is a sum over the silo's rows (``vcmc.rows.ppc``), after the suppression and
    rounding in force; a silo whose operator set ``share_assessment = False`` refuses the request."""
    from vcmc.rows.ppc import assess_rows

    privacy = silo.privacy_in_force
    if not privacy.share_assessment:
        raise DisclosureError(f"silo {silo.name!r} does not take part in model assessment: its operator "
                              "set share-assessment = false")
    pi = np.asarray(request.pi, dtype=np.float64)
    profiles = np.asarray(request.profiles, dtype=np.float64)
    pairs = np.asarray(request.pairs, dtype=np.int64).reshape(-1, 2)
    p = silo.n_columns
    if pi.ndim != 2 or profiles.shape != (*pi.shape, p):
        raise ConfigError(f"assess: pi must be (R, C) draws and profiles (R, C, {p}) draws of the same "
                          f"clusters; got shapes {pi.shape} and {profiles.shape}")
    if pi.shape[0] < 1 or pi.shape[1] < 1:
        raise ConfigError(f"assess: at least one draw of at least one cluster is needed; got {pi.shape}")
    var = np.repeat(np.arange(len(silo.n_modalities)), silo.n_modalities)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= p or np.any(var[pairs[:, 0]] == var[pairs[:, 1]])):
        raise ConfigError(f"assess: pairs must be columns in [0, {p}) of two different variables")
    seed = np.random.SeedSequence(int(request.seed_entropy), spawn_key=tuple(int(k) for k in request.spawn_key))
    sums = assess_rows(silo.codes, silo.n_modalities, pi, profiles, pairs, rng=seed, privacy=privacy)
    if request.gaussian is not None:
        sums.update(_gaussian_assessment(silo, pi, profiles, np.asarray(request.gaussian, dtype=np.float64), seed))
    return AssessReply(**sums)


def _gaussian_assessment(silo, pi, profiles, gaussian, seed) -> dict:
    """With Gaussian items (docs/design.md §17.7): the WAIC sums and the occupancy with every item's density (the
    categorical replicates stay valid: the items' margins do not depend on the Gaussian ones), and each item's
    observed and replicated sums. On a stream of its own, so the categorical checks are those of the same seed."""
    from vcmc.rows import mixed

    gen = np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 0x6A55)))
    waic = mixed.waic_sums(silo.codes, silo.n_modalities, silo.values, pi, profiles, gaussian)
    return {"lppd": waic["lppd"], "p_waic": waic["p_waic"], "elpd": waic["elpd"], "elpd_m2": waic["elpd_ss"],
            "occupied": mixed.occupancy(silo.codes, silo.n_modalities, silo.values, pi, profiles, gaussian, gen),
            "gaussian_observed": mixed.item_sums(silo.values),
            "gaussian_replicated": np.stack([mixed.replicate_item_sums(silo.values, pi[r], gaussian[r], gen)
                                             for r in range(pi.shape[0])])}


def waic_grid(n_modalities, pi: np.ndarray, profiles: np.ndarray, round_to: int) -> float:
    """The grid (nats) to which a silo's WAIC sums are rounded when its operator rounds counts to ``round_to``:
    ``round_to`` rows' worth of log density, a row's worth being the entropy of the fitted model's predictive
    of each variable summed over variables (mean over the draws; an upper bound of a typical row's
    ``-log p(x_i)``). It is computed from the announced draws alone, so the grid says nothing of the rows: a
    sum rounded to it hides the contribution of fewer than about ``round_to / 2`` rows, as rounding a count
    does. 0 (no rounding) when ``round_to`` is 1."""
    if int(round_to) <= 1:
        return 0.0
    offsets = profile_offsets(n_modalities)
    pi = np.asarray(pi, dtype=np.float64)
    marginal = np.einsum("rc,rcp->rp", pi / pi.sum(axis=1, keepdims=True), np.asarray(profiles, dtype=np.float64))
    marginal = marginal / np.repeat(np.add.reduceat(marginal, offsets[:-1], axis=1), np.diff(offsets), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(marginal > 0, -marginal * np.log(marginal), 0.0)
    return float(int(round_to) * max(terms.sum(axis=1).mean(), 1e-3))


def release_at(gate, reply: AssessReply, pi: np.ndarray, profiles) -> AssessReply:
    """The assessment's sums as they may leave, for the draws ``pi`` and ``profiles`` it was made at."""
    fields = ("n_observed", "observed", "replicated", "pair_n_observed", "pair_observed", "pair_replicated")
    changes = {f: protect_vector(gate, getattr(reply, f)) for f in fields}
    occupied = np.asarray(reply.occupied)
    if occupied.size and not np.isin(occupied, (0, 1)).all():
        raise DisclosureError(f"silo {gate.silo.name!r}: an assess reply's occupancy must be 0/1 indicators")
    grid = 0.0
    if gate.privacy.round_to > 1:   # the grid needs the profiles
        grid = waic_grid(gate.silo.n_modalities, pi, profiles(), gate.privacy.round_to)
    if grid > 0:
        # the WAIC sums: the review read an exact cell count from two lppd values; rounded like a count
        # (``waic_grid``), and elpd from the rounded parts so that the message stays consistent
        lppd = float(np.floor(reply.lppd / grid + 0.5) * grid)
        p_waic = float(np.floor(reply.p_waic / grid + 0.5) * grid)
        changes.update(lppd=lppd, p_waic=p_waic, elpd=lppd - p_waic,
                       elpd_m2=float(np.floor(reply.elpd_m2 / grid ** 2 + 0.5) * grid ** 2))
    if reply.gaussian_observed is not None:
        changes.update(gaussian_observed=_released_item_sums(gate, reply.gaussian_observed),
                       gaussian_replicated=np.stack([_released_item_sums(gate, r) for r in reply.gaussian_replicated]))
    return dataclasses.replace(reply, **changes)


def _released_item_sums(gate, sums) -> np.ndarray:
    """A whole-silo item's rows, sum and sum of squares: the rows as a count, the sums by §17.4's rounding."""
    from vcmc.family.gaussian import release_sums

    sums = np.asarray(sums, dtype=np.float64)
    flat = np.concatenate([protect_vector(gate, sums[0]), sums[1], sums[2]])[None, :]
    return release_sums(flat, sums.shape[1], precision=gate.privacy.sum_precision)[0].reshape(3, -1)


def release(gate, request: AssessRequest, reply: AssessReply) -> AssessReply:
    return release_at(gate, reply, request.pi, lambda: request.profiles)


endpoint(AssessRequest, admit=admit, answer=answer, release=release)
