"""Announce: the run's global draws, checked against what the silo sent and recorded (by digest), so that
later assign and assess requests use only them (docs/federation.md, "Threat model")."""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.protocol import AnnounceReply, AnnounceRequest
from vcmc.silo import checks as rc
from vcmc.silo.endpoints import endpoint
from vcmc.silo.gaussian import check_announced
from vcmc.silo.state import digest_rows


def admit(gate, request: AnnounceRequest) -> AnnounceRequest:
    st = gate.state
    if st.announced and gate.policy.require_announcement:
        raise DisclosureError(f"silo {gate.silo.name!r}: the global draws of this run were announced already "
                              "(once per summary)")
    local = gate.silo.local
    n_global = int(request.n_global)
    rc.cap("announce", clusters=n_global, max_clusters=gate.policy.max_clusters)
    assignment = rc.assignment("announce", request.assignment, local.n_clusters, n_global)
    pi = rc.probabilities("announce pi", request.pi, ndim=2, floor=0.0, sums_to_one=True)
    profiles = rc.profiles("announce profiles", request.profiles, (None, n_global, gate.silo.n_columns),
                           gate.silo.n_modalities, floor=0.0)
    rc.cap("announce", draws=max(pi.shape[0], profiles.shape[0]), max_draws=gate.policy.max_draws)
    if pi.shape[1] != n_global:
        raise ConfigError(f"announce: pi must have {n_global} columns; got shape {pi.shape}")
    rc.check_weights_are_the_silos(pi, local.pi_draws, assignment, n_global, silo=gate.silo.name)
    sent = np.asarray(st.sent_profile_mean, dtype=np.float64)
    radius = np.asarray(st.sent_profile_radius, dtype=np.float64)
    if sent.shape != (local.n_clusters, gate.silo.n_columns):        # a state saved before they were recorded
        sent, radius = rc.sent_profile_spread(np.asarray(local.profile_draws, dtype=np.float64),
                                              gate.silo.n_modalities)
    rc.check_profiles_near_the_silos(profiles, sent, radius, local.cluster_sizes, assignment, gate.silo.n_modalities,
                                     tolerance=gate.policy.draw_tolerance, silo=gate.silo.name)
    check_announced(gate, request, assignment, profiles.shape[0])
    st.announced, st.assignment, st.n_global = True, assignment.tolist(), n_global
    st.pi_rows, st.profile_rows = digest_rows(pi), digest_rows(profiles.reshape(profiles.shape[0], -1))
    return request


def answer(silo, request: AnnounceRequest) -> AnnounceReply:
    # the gate checked and recorded the draws on admission; nothing of the data is involved
    return AnnounceReply(n_pi_draws=int(np.asarray(request.pi).shape[0]),
                         n_profile_draws=int(np.asarray(request.profiles).shape[0]))


def release(gate, request, reply: AnnounceReply) -> AnnounceReply:
    return reply


def require_announced(gate, what: str) -> bool:
    """True when draws were announced (later requests must use them); raises if they must have been."""
    if gate.state.announced:
        return True
    if gate.policy.require_announcement:
        raise DisclosureError(f"silo {gate.silo.name!r}: a {what} request needs the run's global draws "
                              "announced first (AnnounceRequest)")
    return False


def check_draws(gate, what: str, pi: np.ndarray, profiles: np.ndarray, *, announced: bool) -> None:
    """Draws of weights ``pi`` (R, C) and profiles (R, C, P) of the same clusters, at most ``max_draws``, and
    where draws were announced every one of them announced (byte for byte)."""
    if pi.ndim != 2 or profiles.ndim != 3 or pi.shape[0] != profiles.shape[0]:
        raise ConfigError(f"{what}: pi must be (R, C) draws and profiles (R, C, P) draws of the same clusters; "
                          f"got shapes {pi.shape} and {profiles.shape}")
    rc.cap(what, draws=pi.shape[0], max_draws=gate.policy.max_draws)
    if not announced:
        return
    known_pi, known_prof = set(gate.state.pi_rows), set(gate.state.profile_rows)
    if not set(digest_rows(pi)) <= known_pi or not set(
            digest_rows(profiles.reshape(profiles.shape[0], -1))) <= known_prof:
        raise DisclosureError(f"silo {gate.silo.name!r}: the {what} request uses draws that were not announced "
                              "in this run")


endpoint(AnnounceRequest, admit=admit, answer=answer, release=release)
