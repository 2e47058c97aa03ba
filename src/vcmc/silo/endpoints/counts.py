"""Counts: count tables at parameters the server chooses (the federated-gradient and design strategies;
docs/design.md §7), released as every count table is (``vcmc.silo.release.protect_table``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import CountsReply, CountsRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.release import on_grid, predictive_entropy, protect_table, scalar_grid, scalars_exact


def admit(gate, request: CountsRequest) -> CountsRequest:
    n_global = int(request.n_global)
    rc.cap("counts", clusters=n_global, max_clusters=gate.policy.max_clusters)
    if request.mode == "soft":
        if request.pi is None or request.profiles is None:
            raise ConfigError("a soft counts request needs pi (M, C) and profiles (M, C, P)")
        pi = rc.probabilities("counts pi", request.pi, ndim=2, floor=0.0, sums_to_one=True)
        rc.cap("counts", draws=pi.shape[0], max_draws=gate.policy.max_draws)
        prof = rc.profiles("counts profiles", request.profiles, (*pi.shape, gate.silo.n_columns),
                           gate.silo.n_modalities, floor=gate.policy.profile_floor)
        return dataclasses.replace(request, pi=pi, profiles=prof)
    if request.mode != "hard":
        raise ConfigError(f"counts request mode must be 'soft' or 'hard'; got {request.mode!r}")
    if not gate.privacy.share_counts:
        raise DisclosureError(f"silo {gate.silo.name!r} does not send count tables: its operator set "
                              "share-counts = false")
    return request


def answer(silo, request: CountsRequest) -> CountsReply:
    """Soft mode: cluster (M, C), modality (M, C, P), loglik (M,). Hard mode (the local partition propagated
    through ``assignment``): cluster (C,), modality (C, P), loglik of shape (0,) (not defined without
    parameters)."""
    from vcmc.rows.counts import hard_counts, soft_counts

    if request.mode == "soft":
        cluster, modality, loglik = soft_counts(silo.codes, silo.n_modalities, np.asarray(request.pi),
                                                np.asarray(request.profiles))
        return CountsReply(cluster=np.asarray(cluster, dtype=np.float64),
                           modality=np.asarray(modality, dtype=np.float64),
                           loglik=np.asarray(loglik, dtype=np.float64))
    a = silo.check_assignment(request.assignment, request.n_global, "hard counts")
    labels = a[silo.require_local("hard counts").partition]
    cluster, modality = hard_counts(silo.codes, silo.n_modalities, labels, int(request.n_global))
    return CountsReply(cluster=np.asarray(cluster, dtype=np.float64),
                       modality=np.asarray(modality, dtype=np.float64), loglik=np.zeros(0))


def release(gate, request, reply: CountsReply) -> CountsReply:
    """The tables as every count table (``protect_table``: each draw's clusters against the silo's row count,
    cells in their blocks and columns); the log-likelihood sums on a grid of ``rows_of_grid`` rows' worth of
    each draw's log density (``predictive_entropy`` of the request's parameters), exact only in the analyst's
    own session without protection."""
    cluster, modality = protect_table(gate, reply.cluster, reply.modality)
    loglik = np.asarray(reply.loglik, dtype=np.float64)
    if loglik.size and not scalars_exact(gate):
        if request.pi is None or request.profiles is None:
            loglik = np.zeros_like(loglik)          # no parameters to scale a grid by: not sent
        else:
            loglik = on_grid(loglik, scalar_grid(gate, predictive_entropy(gate.silo.n_modalities, request.pi,
                                                                          request.profiles)))
    return dataclasses.replace(reply, cluster=cluster, modality=modality, loglik=loglik)


endpoint(CountsRequest, admit=admit, answer=answer, release=release)
