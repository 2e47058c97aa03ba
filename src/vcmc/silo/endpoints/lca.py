"""The latent class analysis (docs/design.md §15): EM's E-step sums, the classification counts and the
three-step structural sums, at parameters the server chooses, so answered only where the operator allows
"lca" (``STRATEGIES`` of the requests); parameters finite, floored, capped; auxiliary columns only those the
operator allowed for that use."""

from __future__ import annotations

import dataclasses

import numpy as np

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
from vcmc.silo.release import round_real, small


def admit(gate, request):
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


def _protect(gate, v):
    """Suppression and rounding of a count-like sum. The minimum cluster size is not applied to the EM sums
    (EM needs every class's sums; an operator who allows "lca" accepts sums at server-chosen parameters,
    docs/federation.md)."""
    privacy = gate.privacy
    v = np.asarray(v, dtype=np.float64)
    if privacy.suppress_cells_below > 1:
        v = np.where((v > 0) & (v < privacy.suppress_cells_below), 0.0, v)
    return round_real(v, privacy.round_to)


def _unprotected(gate) -> bool:
    return gate.privacy.round_to <= 1 and gate.privacy.suppress_cells_below <= 1


def release_estep(gate, request, reply: LcaEStepReply) -> LcaEStepReply:
    gaussian = reply.gaussian
    if gaussian is not None and (gate.privacy.sum_precision > 0 or gate.privacy.sum_noise is not None):
        from vcmc.family.gaussian import release_sums

        g = gaussian.shape[1] // 3
        gaussian = release_sums(gaussian, g, precision=gate.privacy.sum_precision,
                                noise_scale=gate.privacy.sum_noise, rng=gate.noise_rng())
        reply = dataclasses.replace(reply, gaussian=gaussian)
    if _unprotected(gate):
        return reply
    if gaussian is not None:
        g = gaussian.shape[1] // 3
        gaussian = np.concatenate([_protect(gate, gaussian[:, :g]), gaussian[:, g:]], axis=1)
    return dataclasses.replace(reply, cluster=_protect(gate, reply.cluster), modality=_protect(gate, reply.modality),
                               gaussian=gaussian)


def release_classify(gate, request, reply: LcaClassifyReply) -> LcaClassifyReply:
    if _unprotected(gate):
        return reply
    return dataclasses.replace(reply, cross=_protect(gate, reply.cross))


def release_structural(gate, request: LcaStructuralRequest, reply: LcaStructuralReply) -> LcaStructuralReply:
    """The size floor of the structural (covariate or distal) sums: their score, Hessian and moments are
    per-class sums over the silo's rows weighted by the measurement model's posterior, so a class holding
    fewer than the minimum cluster size in this silo (in expectation, but more than none) would describe
    those few people: the reply is refused (in a deployment; the analyst's own session sends it)."""
    if not gate.policy.structural_floor:
        return reply
    from vcmc.rows.counts import soft_counts

    pi = np.asarray(request.pi, dtype=np.float64)[None]
    profiles = np.asarray(request.profiles, dtype=np.float64)[None]
    cluster, _, _ = soft_counts(gate.silo.codes, gate.silo.n_modalities, pi, profiles)
    if np.any(small(np.asarray(cluster)[0], gate.min_size)):
        raise DisclosureError(f"silo {gate.silo.name!r}: a latent class holds fewer than the minimum cluster size "
                              f"({gate.min_size}) of its rows; its structural sums are not sent")
    return reply


endpoint(LcaEStepRequest, admit=admit, answer=answer_estep, release=release_estep)
endpoint(LcaClassifyRequest, admit=admit, answer=answer_classify, release=release_classify)
endpoint(LcaStructuralRequest, admit=admit_structural, answer=answer_structural, release=release_structural)
