"""Assign: the silo's rows labelled with the global clusters (labels and memberships stay in the silo, and are
written on its host where its operator set ``out-dir``); cluster-level sums leave it."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import AssignReply, AssignRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.endpoints.announce import check_draws, require_announced
from vcmc.silo.gaussian import check_requested
from vcmc.silo.release import noised_vector, protect_vector, round_real, small, withhold


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
    from vcmc.rows.memberships import membership_summary, memberships_to_target

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
            memberships, monte_carlo = memberships_to_target(silo.codes, silo.n_modalities, pi, profiles)
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
    """Clusters under the minimum size withheld from every per-cluster sum; the counts noised, suppressed and
    rounded, the real sums rounded; the whole-silo scalars (entropy, the draws and Monte Carlo error) kept."""
    privacy = gate.privacy
    counts = noised_vector(gate, reply.counts)
    withheld = small(counts, gate.min_size)
    expected = None if reply.expected is None else np.asarray(reply.expected, dtype=np.float64)
    probability = None if reply.probability is None else np.asarray(reply.probability, dtype=np.float64)
    if expected is not None:
        withheld_e = withheld | small(expected, gate.min_size)
        expected = round_real(np.where(withheld_e, 0.0, expected), privacy.round_to)
    if probability is not None:
        probability = round_real(np.where(withheld | small(probability, gate.min_size), 0.0, probability),
                                 privacy.round_to)
    counts = withhold(protect_vector(gate, np.where(withheld, 0, counts)), gate.min_size)
    # rounding can take a quantity under the minimum: withheld again after it
    expected = None if expected is None else withhold(expected, gate.min_size)
    probability = None if probability is None else withhold(np.where(counts == 0, 0.0, probability), gate.min_size)
    return dataclasses.replace(reply, counts=counts, expected=expected, probability=probability)


def after(silo, request) -> None:
    """The silo's own memberships.csv and assignments.csv on its host (once per run)."""
    silo.write_labels(rounds=False)


endpoint(AssignRequest, admit=admit, answer=answer, release=release, after=after)
