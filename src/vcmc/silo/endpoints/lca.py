"""The latent class analysis (docs/design.md §15): EM's E-step sums, the classification counts and the
three-step structural sums, at parameters the server chooses, so answered only where the operator allows
"lca" (``STRATEGIES`` of the requests); parameters finite, floored, capped; auxiliary columns only those the
operator allowed for that use."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.disclosure import complementary_withholding
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol.lca import (
    LcaClassifyReply,
    LcaClassifyRequest,
    LcaEStepReply,
    LcaEStepRequest,
    LcaStructuralReply,
    LcaStructuralRequest,
)
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.release import (
    on_grid,
    predictive_entropy,
    protect_table_at,
    round_real,
    scalar_grid,
    scalars_exact,
    small,
)


def admit(gate, request):
    if gate.privacy.dp_epsilon is not None and not gate.own_session:
        raise DisclosureError(f"silo {gate.silo.name!r} does not take part in the latent class analysis under "
                              "differential privacy: its sums are not noised")
    pi = rc.probabilities("lca pi", request.pi, ndim=1, floor=0.0, sums_to_one=False)
    gaussian = getattr(request, "gaussian", None)
    if gaussian is not None:
        g = 0 if gate.silo.values is None else gate.silo.values.shape[1]
        gauss = np.asarray(gaussian, dtype=np.float64)
        if g == 0 or gauss.shape != (pi.shape[0], 2 * g) or not np.all(np.isfinite(gauss)) or np.any(gauss[:, g:] <= 0):
            raise ConfigError(f"a latent class request's Gaussian parameters must be ({pi.shape[0]}, {2 * g}) finite "
                              "means and positive variances of the silo's continuous items")
    rc.cap("lca", clusters=pi.shape[0], max_clusters=gate.policy.max_clusters)
    prof = rc.profiles("lca profiles", request.profiles, (pi.shape[0], gate.silo.n_columns), gate.silo.n_modalities,
                       floor=gate.policy.profile_floor)
    if np.array_equal(prof, np.asarray(request.profiles, dtype=np.float64)):
        return request                       # unchanged (an honest fit's profiles are above the floor)
    return dataclasses.replace(request, profiles=prof)


def admit_structural(gate, request: LcaStructuralRequest) -> LcaStructuralRequest:
    """The rules of every latent class request, and the auxiliary columns the operator allows for the model."""
    allowed = gate.silo.allowed_auxiliary
    if allowed is not None:
        key = {"covariate": "covariates", "distal": "distal"}.get(request.model)
        if key is None:
            raise ConfigError(f"a latent class structural request for an unknown model {request.model!r}")
        from vcmc.rows.lca import AuxiliarySpec

        refused = [n for n in AuxiliarySpec.from_json(request.spec_json).names if n not in allowed[request.model]]
        if refused:
            raise ConfigError(f"the silo's operator does not allow columns {refused} as {key} (node config "
                              f"'{key}' lists {list(allowed[request.model])})")
    return admit(gate, request)


def answer_estep(silo, request: LcaEStepRequest) -> LcaEStepReply:
    from vcmc.rows.lca import check_point, estep_sums, one_hot

    codes, n_modalities = silo.codes, silo.n_modalities
    # the rows' indicator matrix is kept between the hundreds of EM rounds of a fit (inside the silo)
    cached = silo.__dict__.get("_lca_indicators")
    if cached is None or cached[0] is not codes:
        cached = (codes, one_hot(codes, n_modalities))
        silo.__dict__["_lca_indicators"] = cached
    pi, profiles = check_point(codes, n_modalities, request.pi, request.profiles)
    if request.gaussian is None:
        return LcaEStepReply(**estep_sums(codes, n_modalities, pi, profiles, cached[1]))
    sums = estep_sums(codes, n_modalities, pi, profiles, cached[1], values=silo.values, gaussian=request.gaussian)
    # the log-likelihood of the values in their own units (StepMix's): the standardisation's Jacobian
    scales = np.log([v.scale for v in silo.data.schema.continuous])
    sums["loglik"] -= float(np.sum(~np.isnan(silo.values), axis=0) @ scales)
    return LcaEStepReply(**sums)


def answer_classify(silo, request: LcaClassifyRequest) -> LcaClassifyReply:
    from vcmc.rows.lca import classify_sums

    return LcaClassifyReply(cross=classify_sums(silo.codes, silo.n_modalities, request.pi, request.profiles))


def answer_structural(silo, request: LcaStructuralRequest) -> LcaStructuralReply:
    from vcmc.rows.lca import structural_sums

    sums = structural_sums(silo.codes, silo.n_modalities, silo.auxiliary, model=request.model,
                           spec_json=request.spec_json, pi=request.pi, profiles=request.profiles,
                           log_error=request.log_error, params=request.params, where=f"silo {silo.name!r}")
    return LcaStructuralReply(n_rows=sums["n_rows"], loglik=sums["loglik"],
                              score=np.asarray(sums["score"], dtype=np.float64),
                              hessian=np.asarray(sums["hessian"], dtype=np.float64),
                              moments=np.asarray(sums["moments"], dtype=np.float64))


def _counts_protected(gate) -> bool:
    return gate.privacy.round_to > 1 or gate.privacy.suppress_cells_below > 1


def release_estep(gate, request, reply: LcaEStepReply) -> LcaEStepReply:
    """With suppression or rounding set: a class's expected count under the suppression threshold withheld with
    its modality counts and with complements against the silo's row count (sent in the reply), cells
    suppressed with complements in their blocks and columns, and rounding (``protect_table_at``; the minimum
    cluster size is not applied: EM needs every class's sums). The log-likelihood on a grid of
    ``rows_of_grid`` rows' worth of log density (``predictive_entropy`` of the request's point, and each
    Gaussian item's, ``_gaussian_worth``) and the entropy of ``rows_of_grid`` times log K, except in the
    analyst's own session without protection. The Gaussian items' sums as ``_release_gaussian`` says."""
    changes: dict[str, object] = {}
    if _counts_protected(gate):
        below = float(gate.privacy.suppress_cells_below)
        cluster, modality = protect_table_at(gate, reply.cluster, reply.modality, limit=below if below > 1 else 0.0,
                                             noise=False)
        changes.update(cluster=cluster, modality=modality)
    if reply.gaussian is not None:
        changes["gaussian"] = _release_gaussian(gate, reply.gaussian, changes.get("cluster"))
    if not scalars_exact(gate):
        k = max(int(np.asarray(request.pi).size), 2)
        worth = float(predictive_entropy(gate.silo.n_modalities, np.asarray(request.pi)[None],
                                         np.asarray(request.profiles)[None])[0])
        if reply.gaussian is not None:
            worth += _gaussian_worth(gate, np.asarray(request.gaussian, dtype=np.float64))
        changes["loglik"] = on_grid(float(reply.loglik), scalar_grid(gate, worth))
        changes["entropy"] = max(on_grid(float(reply.entropy), scalar_grid(gate, np.log(k))), 0.0)
    return dataclasses.replace(reply, **changes) if changes else reply


def _release_gaussian(gate, sums, cluster_sent=None) -> np.ndarray:
    """The E-step's Gaussian sums (K, 3G: each class's expected rows observing each item, their expected sum and
    sum of squares, standardised) as they may leave the silo (docs/design.md §17.5):

    * with suppression or rounding set, the expected rows as the other E-step counts: withheld with their class
      (sent as 0), under the suppression threshold withheld with complements in the item's column (whose sum,
      the silo's rows observing the item, the server may know), rounded; a withheld or rounded-to-0 count sends
      no sum or sum of squares;
    * the sums noised (Laplace, ``privacy.sum_noise``) and rounded to ``privacy.sum_precision``
      (``vcmc.family.gaussian.release_sums``) where set.

    They are the E-step's sufficient statistics, as its modality counts are, and are released as those are: not
    on the grid of scalars (``scalar_grid``), which would take the variances apart (``S2 / N - mean^2`` of sums on a
    grid of ten rows' worth loses a class's variance to cancellation, and EM collapses the class); an operator
    who allows "lca" accepts sums at the server's parameters (``vcmc.silo.policy.EXPOSES``) and rounds these with
    ``sum-precision`` as the counts with ``round-to``.
    """
    from vcmc.family.gaussian import release_sums

    privacy = gate.privacy
    out = np.array(sums, dtype=np.float64, copy=True)
    g = out.shape[1] // 3
    hidden = np.zeros((out.shape[0], g), dtype=bool)
    if _counts_protected(gate):
        n = np.maximum(out[:, :g], 0.0)
        if cluster_sent is not None:
            hidden |= (np.asarray(cluster_sent) == 0)[:, None]
        below = float(privacy.suppress_cells_below)
        if below > 1:
            hidden |= small(n, below)
            if hidden.any():
                columns = np.broadcast_to(np.arange(g)[None, :], n.shape)
                hidden = complementary_withholding(n, hidden, [columns], below)
        out[:, :g] = round_real(n, privacy.round_to)
        hidden |= out[:, :g] == 0
    if privacy.sum_precision > 0 or privacy.sum_noise is not None:
        out = release_sums(out, g, precision=privacy.sum_precision, noise_scale=privacy.sum_noise,
                           rng=gate.noise_rng())
    for block in range(3):
        out[:, block * g:(block + 1) * g][hidden] = 0.0
    return out


def _gaussian_worth(gate, gaussian: np.ndarray) -> float:
    """One row's worth of the Gaussian items' log density (in the data's units, as the silo's log-likelihood) at
    the request's means and variances ``gaussian`` (K, 2G): per item the largest over the classes of
    ``0.92 + 0.5 + |log sd|`` (the entropy of the class's normal, bounded away from 0: a typical row's
    ``-log N(x | mu, s2)``), summed over the items; from the request and the schema's scales alone."""
    g = gaussian.shape[1] // 2
    scales = np.array([v.scale for v in gate.silo.data.schema.continuous], dtype=np.float64)
    log_sd = 0.5 * np.log(gaussian[:, g:]) + np.log(scales)[None, :]                               # (K, G)
    return float(np.sum(np.max(1.42 + np.abs(log_sd), axis=0)))


def release_classify(gate, request, reply: LcaClassifyReply) -> LcaClassifyReply:
    """With suppression or rounding set: cells under the threshold suppressed, with complements in each row
    (its sum is the class's expected count, an E-step's at the same point) and in the whole table (its sum is
    the silo's row count), then rounding."""
    if not _counts_protected(gate):
        return reply
    privacy = gate.privacy
    cross = np.maximum(np.asarray(reply.cross, dtype=np.float64), 0.0)
    hidden = np.zeros(cross.shape, dtype=bool)
    below = float(privacy.suppress_cells_below)
    if below > 1:
        rows = np.broadcast_to(np.arange(cross.shape[0])[:, None], cross.shape)
        hidden = complementary_withholding(cross, small(cross, below), [rows, np.zeros(cross.shape, int)], below)
    return dataclasses.replace(reply, cross=np.where(hidden, 0.0, round_real(cross, privacy.round_to)))


def release_structural(gate, request: LcaStructuralRequest, reply: LcaStructuralReply) -> LcaStructuralReply:
    """The size floor of the structural (covariate or distal) sums: their score, Hessian and moments are
    per-class sums over the silo's rows weighted by the measurement model's posterior, so a class holding
    fewer than the minimum cluster size in this silo (in expectation, but more than none) would describe
    those few people: the reply is refused (in a deployment; the analyst's own session sends it). Every sum
    then leaves on a grid of ``rows_of_grid`` rows' worth of it (``vcmc.rows.lca.structural_worths``), except
    in the analyst's own session without protection."""
    if gate.policy.structural_floor:
        from vcmc.rows.counts import soft_counts

        pi = np.asarray(request.pi, dtype=np.float64)[None]
        profiles = np.asarray(request.profiles, dtype=np.float64)[None]
        cluster, _, _ = soft_counts(gate.silo.codes, gate.silo.n_modalities, pi, profiles)
        if np.any(small(np.asarray(cluster)[0], gate.min_size)):
            raise DisclosureError(f"silo {gate.silo.name!r}: a latent class holds fewer than the minimum cluster "
                                  f"size ({gate.min_size}) of its rows; its structural sums are not sent")
    if scalars_exact(gate):
        return reply
    from vcmc.rows.lca import structural_worths

    worth = structural_worths(gate.silo.auxiliary, model=request.model, spec_json=request.spec_json,
                              k=int(np.asarray(request.pi).size), params=request.params,
                              where=f"silo {gate.silo.name!r}")
    return dataclasses.replace(
        reply, loglik=on_grid(float(reply.loglik), scalar_grid(gate, worth["loglik"])),
        score=on_grid(reply.score, scalar_grid(gate, worth["score"])),
        hessian=on_grid(reply.hessian, scalar_grid(gate, worth["hessian"])),
        moments=on_grid(reply.moments, scalar_grid(gate, worth["moments"])))


endpoint(LcaEStepRequest, admit=admit, answer=answer_estep, release=release_estep)
endpoint(LcaClassifyRequest, admit=admit, answer=answer_classify, release=release_classify)
endpoint(LcaStructuralRequest, admit=admit_structural, answer=answer_structural, release=release_structural)
