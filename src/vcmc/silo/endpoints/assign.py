"""Assign: the silo's rows labelled with the global clusters (labels and memberships stay in the silo, and are
written on its host where its operator set ``out-dir``); cluster-level sums leave it."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.disclosure import round_counts
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import AssignReply, AssignRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.endpoints.announce import check_draws, require_announced
from vcmc.silo.gaussian import check_requested
from vcmc.silo.release import (
    cluster_limit,
    noised_vector,
    on_grid,
    round_real,
    scalar_grid,
    scalars_exact,
    small,
    withheld_entries,
)


def admit(gate, request: AssignRequest) -> AssignRequest:
    announced = require_announced(gate, "assign")
    st = gate.state
    n_global = int(request.n_global)
    rc.cap("assign", clusters=n_global, max_clusters=gate.policy.max_clusters)
    if announced and (n_global != st.n_global or np.asarray(request.assignment).ravel().tolist() != st.assignment):
        raise DisclosureError(f"silo {gate.silo.name!r}: the assign request's matching differs from the one "
                              "announced in this run")
    if (request.pi is None) != (request.profiles is None):
        raise ConfigError("assign: pi and profiles come together or not at all")
    if request.pi is None:
        return request
    pi = np.atleast_2d(np.asarray(request.pi, dtype=np.float64))
    profiles = np.asarray(request.profiles, dtype=np.float64)
    if profiles.ndim == 2:
        profiles = profiles[None]
    check_draws(gate, "assign", pi, profiles, announced=announced)
    pi = rc.probabilities("assign pi", pi, ndim=2, floor=0.0, sums_to_one=True)
    prof = rc.profiles("assign profiles", profiles, (pi.shape[0], n_global, gate.silo.n_columns),
                       gate.silo.n_modalities, floor=gate.policy.profile_floor)
    gaussian = check_requested(gate, request, "assign", pi.shape[0], announced)
    return dataclasses.replace(request, pi=pi, profiles=prof, gaussian=gaussian)


def answer(silo, request: AssignRequest) -> AssignReply:
    """Memberships of every row in the global clusters and its label (both kept in the silo).

    Without parameters the local posterior is propagated through ``assignment``: a row's membership of a
    global cluster is its share of kept iterations in the local clusters mapped to it. With ``pi`` and
    ``profiles`` (draws) it is the allocation probability averaged over the draws (``vcmc.rows.memberships``).
    The label is the most probable cluster; only cluster-level sums leave.
    """
    from vcmc.rows.memberships import MC_ERROR_TARGET, membership_summary, memberships_to_target

    n_global = int(request.n_global)
    if request.pi is not None and request.profiles is not None:
        pi = np.atleast_2d(np.asarray(request.pi, dtype=np.float64))
        profiles = np.asarray(request.profiles, dtype=np.float64)
        if profiles.ndim == 2:
            profiles = profiles[None]
        p = silo.n_columns
        if pi.shape[1] != n_global or profiles.shape[1:] != (n_global, p) or pi.shape[0] != profiles.shape[0]:
            raise ConfigError(f"assign: pi and profiles must be draws of {n_global} clusters over {p} "
                              f"modality columns; got shapes {pi.shape} and {profiles.shape}")
        if request.gaussian is not None:       # every draw sent: the mixed rows' densities (docs/design.md §17.7)
            from vcmc.rows.mixed import memberships as mixed_memberships

            memberships = mixed_memberships(silo.codes, silo.n_modalities, silo.values, pi, profiles,
                                            np.asarray(request.gaussian, dtype=np.float64))
            monte_carlo = None
        else:
            # where scalars are not sent as computed the labelling averages every draw it was sent: stopping at a
            # Monte Carlo target would make the number of draws a function of the worst row (docs/federation.md)
            target = MC_ERROR_TARGET if scalars_exact(silo.gate) else None
            memberships, monte_carlo = memberships_to_target(silo.codes, silo.n_modalities, pi, profiles,
                                                             target=target)
        labels = np.argmax(memberships, axis=1)
    else:
        a = silo.check_assignment(request.assignment, n_global, "assign")
        onehot = np.zeros((a.size, n_global))
        onehot[np.arange(a.size), a] = 1.0
        memberships = silo.local.membership @ onehot
        # the propagated local partition, unless another global cluster is strictly more probable (several
        # local clusters mapped to one); a tie keeps the local label
        labels = a[silo.local.partition]
        best = np.argmax(memberships, axis=1)
        rows = np.arange(labels.size)
        labels = np.where(memberships[rows, best] > memberships[rows, labels] + 1e-12, best, labels)
        monte_carlo = None
    silo.assignments = labels.astype(np.int64)
    silo.memberships = memberships
    return AssignReply(**membership_summary(memberships, silo.assignments, monte_carlo))


def release(gate, request, reply: AssignReply) -> AssignReply:
    """An assign reply as it may leave (``release_sums``): also the global-informed rounds' finish, whose reply
    is an ``AssignReply`` (signature kept for it)."""
    return release_sums(gate, reply)


def release_sums(gate, reply: AssignReply) -> AssignReply:
    """The counts noised; a cluster withheld from every per-cluster sum where its count or expected count is
    under the limit (before or after rounding), with complements so that the silo's row count gives none of
    them back (``withheld_entries``); the summed probabilities also withheld where small; the rest rounded.
    The whole-silo scalars: the entropy on a grid of ``rows_of_grid`` rows' worth (a row's worth: log C, the
    most one row's memberships can hold), the Monte Carlo error replaced by its bound for the draws averaged
    (0.5 / sqrt(T - 1), a function of T alone), except in the analyst's own session without protection."""
    base = int(gate.privacy.round_to)
    limit = cluster_limit(gate)
    counts = noised_vector(gate, reply.counts)
    expected = None if reply.expected is None else np.asarray(reply.expected, dtype=np.float64)
    probability = None if reply.probability is None else np.asarray(reply.probability, dtype=np.float64)
    withheld = withheld_entries(gate, counts, also=() if expected is None else (expected,))
    changes: dict[str, object] = {"counts": np.where(withheld, 0, round_counts(counts, base)).astype(np.int64)}
    if expected is not None:
        changes["expected"] = np.where(withheld, 0.0, round_real(expected, base))
    if probability is not None:
        hidden = withheld | small(probability, limit) | ((probability > 0) & (round_real(probability, base) < limit))
        changes["probability"] = np.where(hidden, 0.0, round_real(probability, base))
    if not scalars_exact(gate):
        n_global = max(int(np.asarray(reply.counts).shape[0]), 1)
        changes["entropy"] = max(on_grid(float(reply.entropy), scalar_grid(gate, np.log(max(n_global, 2)))), 0.0)
        if int(reply.n_draws) > 0:
            changes["mc_error"] = float(0.5 / np.sqrt(max(int(reply.n_draws) - 1, 1)))
    return dataclasses.replace(reply, **changes)


def after(silo, request) -> None:
    """The silo's own memberships.csv and assignments.csv on its host (once per run)."""
    silo.write_labels(rounds=False)


endpoint(AssignRequest, admit=admit, answer=answer, release=release, after=after)
