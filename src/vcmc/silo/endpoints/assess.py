"""Assess: predictive checks, WAIC sums and sampled occupancy under the global draws (docs/design.md §14):
whole-silo sums, suppressed and rounded like every count, the WAIC sums rounded to a grid where counts are
rounded, refused under DP (its sums are not noised)."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.disclosure import pair_families, round_counts, small_cells, suppress_small_cells
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.model import profile_offsets
from vcmc.protocol import AssessReply, AssessRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.endpoints.announce import check_draws, require_announced
from vcmc.silo.gaussian import check_requested
from vcmc.silo.release import on_grid, predictive_entropy, protect_vector, rows_of_grid, scalars_exact


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
    from vcmc.rows.ppc import assess_rows, occupancy_threshold

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
    # where scalars are not exact, a global cluster is occupied only with the minimum cluster size of the
    # silo's rows: "does anyone here fall in this cluster" is not answered for fewer
    at_least = None if scalars_exact(silo.gate) else silo.gate.min_size
    sums = assess_rows(silo.codes, silo.n_modalities, pi, profiles, pairs, rng=seed, privacy=privacy,
                       occupancy_at_least=at_least)
    if request.gaussian is not None:
        at_least = occupancy_threshold(privacy) if at_least is None else max(int(at_least), 1)
        sums.update(_gaussian_assessment(silo, pi, profiles, np.asarray(request.gaussian, dtype=np.float64), seed,
                                         at_least))
    return AssessReply(**sums)


def _gaussian_assessment(silo, pi, profiles, gaussian, seed, at_least: int) -> dict:
    """With Gaussian items (docs/design.md §17.7): the WAIC sums and the occupancy (a cluster occupied with at
    least ``at_least`` of the silo's rows, as the categorical one) with every item's density (the categorical
    replicates stay valid: the items' margins do not depend on the Gaussian ones), and each item's observed and
    replicated sums. On a stream of its own, so the categorical checks are those of the same seed."""
    from vcmc.rows import mixed

    gen = np.random.default_rng(np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 0x6A55)))
    waic = mixed.waic_sums(silo.codes, silo.n_modalities, silo.values, pi, profiles, gaussian)
    return {"lppd": waic["lppd"], "p_waic": waic["p_waic"], "elpd": waic["elpd"], "elpd_m2": waic["elpd_ss"],
            "occupied": mixed.occupancy(silo.codes, silo.n_modalities, silo.values, pi, profiles, gaussian, gen,
                                        at_least=at_least),
            "gaussian_observed": mixed.item_sums(silo.values),
            "gaussian_replicated": np.stack([mixed.replicate_item_sums(silo.values, pi[r], gaussian[r], gen)
                                             for r in range(pi.shape[0])])}


def waic_grid(n_modalities, pi: np.ndarray, profiles: np.ndarray, rows: int) -> float:
    """The grid (nats) to which a silo's WAIC sums are rounded: ``rows`` rows' worth of log density
    (``vcmc.silo.release.rows_of_grid``), a row's worth being the entropy of the fitted model's predictive of
    each variable summed over variables (mean over the draws, ``predictive_entropy``; an upper bound of a
    typical row's ``-log p(x_i)``). It is computed from the announced draws alone, so the grid says nothing of
    the rows: a sum rounded to it hides the contribution of fewer than about ``rows / 2`` rows, as rounding a
    count does. 0 (exact) when ``rows`` is 0."""
    if int(rows) <= 0:
        return 0.0
    return float(int(rows) * predictive_entropy(n_modalities, pi, profiles).mean())


def waic_grids(n_modalities, pi: np.ndarray, profiles: np.ndarray, rows: int, *,
               n_synthetic: int = 256, gaussian=None) -> tuple[float, float, float]:
    """The grids of the three WAIC sums, each ``rows`` rows' worth of its own per-row term: ``lppd``'s
    ``waic_grid`` (the predictive entropy); ``p_waic``'s the mean over rows of ``var_t log p(x | theta_t)`` and
    ``elpd_m2``'s the variance over rows of ``elpd_x``, both over ``n_synthetic`` rows drawn from the model's
    own predictive at the announced draws (a fixed stream: a function of the draws alone, never of the rows). A
    row's variance over draws is a small fraction of its log density, so ``p_waic`` on the log density's grid
    would be rounded away (measured: docs/federation.md). With Gaussian items (``gaussian`` (R, C, 2G), the
    announced draws, standardised, docs/design.md §17.7) the synthetic rows have their values too and
    ``lppd``'s row's worth adds ``gaussian_worth``."""
    if int(rows) <= 0:
        return 0.0, 0.0, 0.0
    offsets = profile_offsets(n_modalities)
    pi = np.atleast_2d(np.asarray(pi, dtype=np.float64))
    prof = np.asarray(profiles, dtype=np.float64)
    gen = np.random.default_rng(0x3A17)
    r, c = pi.shape
    draw = gen.integers(r, size=n_synthetic)
    weights = pi[draw] / pi[draw].sum(axis=1, keepdims=True)
    cluster = (weights.cumsum(axis=1) > gen.random(n_synthetic)[:, None]).argmax(axis=1)
    log_p = np.log(pi / pi.sum(axis=1, keepdims=True) + 1e-300)[None, :, :].repeat(n_synthetic, axis=0)   # (S, R, C)
    for q in range(offsets.size - 1):
        block = prof[draw, cluster, offsets[q]:offsets[q + 1]]
        block = block / block.sum(axis=1, keepdims=True)
        x = (block.cumsum(axis=1) > gen.random(n_synthetic)[:, None]).argmax(axis=1)
        log_p += np.log(prof[:, :, offsets[q] + x].transpose(2, 0, 1) + 1e-300)
    g_lppd = waic_grid(n_modalities, pi, prof, rows)
    if gaussian is not None:
        gd = np.asarray(gaussian, dtype=np.float64)
        n_items = gd.shape[-1] // 2
        for i in range(n_items):          # after the categorical draws: their stream is the same with or without
            mu, s2 = gd[:, :, i], gd[:, :, n_items + i]                                             # (R, C)
            y = mu[draw, cluster] + np.sqrt(s2[draw, cluster]) * gen.standard_normal(n_synthetic)   # (S,)
            log_p += -0.5 * (np.log(2.0 * np.pi * s2)[None] + (y[:, None, None] - mu[None]) ** 2 / s2[None])
        g_lppd += float(int(rows) * gaussian_worth(pi, gd))
    top = log_p.max(axis=2, keepdims=True)
    log_row = (top + np.log(np.exp(log_p - top).sum(axis=2, keepdims=True)))[:, :, 0]              # (S, R)
    t_top = log_row.max(axis=1, keepdims=True)
    lppd = (t_top + np.log(np.exp(log_row - t_top).mean(axis=1, keepdims=True)))[:, 0]
    var = log_row.var(axis=1)
    return (g_lppd, float(int(rows) * max(var.mean(), 1e-6)), float(int(rows) * max((lppd - var).var(), 1e-6)))


def gaussian_worth(pi: np.ndarray, gaussian: np.ndarray) -> float:
    """One row's worth of the Gaussian items' log density (standardised) under draws ``pi`` (R, C) and
    ``gaussian`` (R, C, 2G): per item ``0.92 + 0.5 + |log sd|`` (``|log N(y | mu, s2)|`` of a row one sd from its
    cluster's mean, bounded), averaged over the clusters by weight and over the draws, summed over the items; a
    function of the announced draws alone."""
    gd = np.asarray(gaussian, dtype=np.float64)
    n_items = gd.shape[-1] // 2
    w = np.atleast_2d(np.asarray(pi, dtype=np.float64))
    w = w / w.sum(axis=1, keepdims=True)
    terms = 1.42 + np.abs(0.5 * np.log(gd[:, :, n_items:]))                                       # (R, C, G)
    return float(np.einsum("rc,rcg->", w, terms) / w.shape[0])


def release_at(gate, reply: AssessReply, pi: np.ndarray, profiles, *, pairs=None, gaussian=None) -> AssessReply:
    """The assessment's sums as they may leave, for the draws ``pi`` and ``profiles`` it was made at (``pairs``:
    the request's, for the complementary suppression of the pair counts; ``gaussian``: its Gaussian draws)."""
    privacy = gate.privacy
    below, base, n_mod = int(privacy.suppress_cells_below), int(privacy.round_to), gate.silo.n_modalities
    changes = {f: protect_vector(gate, getattr(reply, f)) for f in ("n_observed", "pair_n_observed")}
    for field in ("observed", "replicated"):
        # each variable's block sums to the rows that observed it (sent as n_observed)
        table, _ = suppress_small_cells(np.atleast_2d(getattr(reply, field)), below, n_mod, round_to=base)
        changes[field] = round_counts(table, base).reshape(np.shape(getattr(reply, field)))
    for field in ("pair_observed", "pair_replicated"):
        values = np.atleast_2d(np.asarray(getattr(reply, field), dtype=np.int64))
        if pairs is None:
            table = np.where(small_cells(values, below, base), 0, values)
        else:
            lead = np.arange(values.shape[0])[:, None] * max(values.shape[1], 1)
            families = [np.where(f[None, :] >= 0, lead + f[None, :], -1) for f in pair_families(pairs, n_mod)]
            table, _ = suppress_small_cells(values, below, n_mod, round_to=base, families=families)
        changes[field] = round_counts(table, base).reshape(np.shape(getattr(reply, field)))
    occupied = np.asarray(reply.occupied)
    if occupied.size and not np.isin(occupied, (0, 1)).all():
        raise DisclosureError(f"silo {gate.silo.name!r}: an assess reply's occupancy must be 0/1 indicators")
    if not scalars_exact(gate):
        # the WAIC sums: the review read an exact cell count from two lppd values; each rounded to its grid of
        # rows' worth (``waic_grids``), and elpd from the rounded parts so that the message stays consistent
        g_lppd, g_var, g_m2 = waic_grids(n_mod, pi, profiles(), rows_of_grid(gate), gaussian=gaussian)
        lppd = on_grid(float(reply.lppd), g_lppd)
        p_waic = max(on_grid(float(reply.p_waic), g_var), 0.0)
        changes.update(lppd=lppd, p_waic=p_waic, elpd=lppd - p_waic,
                       elpd_m2=max(on_grid(float(reply.elpd_m2), g_m2), 0.0))
    if reply.gaussian_observed is not None:
        changes.update(gaussian_observed=_released_item_sums(gate, reply.gaussian_observed),
                       gaussian_replicated=np.stack([_released_item_sums(gate, r) for r in reply.gaussian_replicated]))
    return dataclasses.replace(reply, **changes)


def _released_item_sums(gate, sums) -> np.ndarray:
    """A whole-silo item's rows, sum and sum of squares (3, G): the rows as a count (``protect_vector``), the sums
    by §17.4's rounding to ``sum-precision``. Like the assessment's ``observed`` counts they are the data's own
    statistics, at no parameter the server chooses and once per run, so not on the grid of scalars."""
    from vcmc.family.gaussian import release_sums

    sums = np.asarray(sums, dtype=np.float64)
    flat = np.concatenate([protect_vector(gate, sums[0]), sums[1], sums[2]])[None, :]
    return release_sums(flat, sums.shape[1], precision=gate.privacy.sum_precision)[0].reshape(3, -1)


def release(gate, request: AssessRequest, reply: AssessReply) -> AssessReply:
    return release_at(gate, reply, request.pi, lambda: request.profiles, pairs=request.pairs,
                      gaussian=getattr(request, "gaussian", None))


endpoint(AssessRequest, admit=admit, answer=answer, release=release)
