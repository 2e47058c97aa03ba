"""Divergence: minimum-divergence matching's costs of each local cluster against the server's reference
(``vcmc.rows.divergence``); one row per local cluster, each of at least the minimum size."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import DivergenceReply, DivergenceRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint


def admit(gate, request: DivergenceRequest) -> DivergenceRequest:
    """Where the operator allows minimum-divergence matching (the gate checked it): in a deployment only without
    suppression, rounding or noise and with the table shared, because the costs are linear in each local
    cluster's membership-weighted table at reference profiles the server chooses and would give back what
    those limits withheld (a set of references reads the table cell by cell)."""
    privacy = gate.privacy
    if not gate.own_session and (privacy.suppress_cells_below > 1 or privacy.round_to > 1
                                 or privacy.dp_epsilon is not None or not privacy.share_counts):
        raise DisclosureError(f"silo {gate.silo.name!r}: minimum-divergence costs would give back the cells its "
                              "suppression, rounding, noise or share-counts = false withholds (they are linear in each "
                              "local cluster's table at reference profiles the server chooses); use the calibrated "
                              "matching")
    p = gate.silo.n_columns
    pi = rc.probabilities("divergence reference_pi", request.reference_pi, ndim=1, floor=0.0, sums_to_one=True)
    c = pi.shape[0]
    rc.cap("divergence", clusters=c, max_clusters=gate.policy.max_clusters)
    prof = rc.profiles("divergence reference_profiles", request.reference_profiles, (c, p),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    if request.rule not in ("penalised", "augmented"):
        raise ConfigError(f"divergence: rule must be 'penalised' or 'augmented'; got {request.rule!r}")
    if not (np.isfinite(request.penalty_multiplier) and 0 < float(request.penalty_multiplier) <= 1e6):
        raise ConfigError("divergence: penalty_multiplier must be finite and in (0, 1e6]")
    return dataclasses.replace(request, reference_pi=pi, reference_profiles=prof)


def answer(silo, request: DivergenceRequest) -> DivergenceReply:
    from vcmc.rows.divergence import divergence_cost

    local = silo.require_local("divergence")
    cost = divergence_cost(silo.codes, silo.n_modalities, local, np.asarray(request.reference_pi),
                           np.asarray(request.reference_profiles), rule=request.rule,
                           penalty_multiplier=float(request.penalty_multiplier))
    return DivergenceReply(cost=np.asarray(cost, dtype=np.float64))


def release(gate, request, reply: DivergenceReply) -> DivergenceReply:
    # one row per local cluster, each of at least the minimum size (checked when the summary was released)
    k = gate.silo.local.n_clusters
    cost = np.asarray(reply.cost, dtype=np.float64)
    if cost.ndim != 2 or cost.shape[0] != k:
        raise DisclosureError(f"silo {gate.silo.name!r}: a divergence reply must have one row per local cluster")
    return reply


endpoint(DivergenceRequest, admit=admit, answer=answer, release=release)
