"""The global-informed rounds (docs/design.md §16): the silo's half of the pooled model's blocked Gibbs sampler
(its rows' allocations, ``vcmc.rows.rounds``), counts of its rows at weights and profiles the server draws,
round after round, so answered only where the operator allows "rounds" or "secure-rounds" (``STRATEGIES`` of
the requests; consecutive count tables differ by the rows that moved, docs/federation.md); after the silo's
own labels exist; log probabilities finite, floored, capped. Under secure aggregation every table leaves
masked (``vcmc.silo.secure_sum``): the server sees only the sum over the silos."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError, NotFittedError
from vcmc.protocol import AssessRequest, AssignReply
from vcmc.protocol.rounds import (
    PUBLIC_KEY_BYTES,
    RoundAssessRequest,
    RoundBirthReply,
    RoundBirthRequest,
    RoundCountsReply,
    RoundFinishRequest,
    RoundKeyReply,
    RoundKeyRequest,
    RoundMaskedCountsReply,
    RoundMoveReply,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
    pack_counts,
)
from vcmc.rows import rounds
from vcmc.silo import checks as rc
from vcmc.silo import secure_sum
from vcmc.silo.endpoints import assess, assign, endpoint
from vcmc.silo.release import noised_vector, protect_table, protect_vector, unprotected, withhold
from vcmc.silo.state import digest_rows

silo_log = logging.getLogger("vcmc.silo")


def _secure_only(gate, request) -> None:
    """An operator who allows only "secure-rounds": every request after the key set-up and the start belongs
    to a stream of masked rounds."""
    if "rounds" not in gate.policy.allowed_strategies and not (
            gate.state.secure_secrets or isinstance(request, RoundKeyRequest | RoundStartRequest)):
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator allows the rounds only under secure "
                              "aggregation ('secure-rounds'), and this run's rounds were not started so")


# -- secure aggregation: the key pair, the key set, the mask of each round -------------------------------------

def admit_key(gate, request: RoundKeyRequest) -> RoundKeyRequest:
    """Secure aggregation's set-up: a fresh key pair for this run (once: the request budget is 1)."""
    _secure_only(gate, request)
    n = int(request.n_silos)
    if not 2 <= n <= gate.policy.max_clusters:
        raise ConfigError(f"round keys: a secure sum is over 2 to {gate.policy.max_clusters} silos; got {n}")
    st = gate.state
    # a new key pair starts a new stream of masks: its rounds are counted afresh (no mask can repeat, its
    # secrets are new)
    st.secure_key, st.secure_n_silos = secure_sum.new_private_key(), n
    st.secure_secrets, st.secure_index, st.secure_round, st.secure_digest = [], -1, 0, ""
    return request


def answer_key(silo, request: RoundKeyRequest) -> RoundKeyReply:
    """The public half of the key pair the gate drew for this run's secure sum (the private half stays in the
    gate's state, the masks are applied as the counts leave the silo)."""
    return RoundKeyReply(public_key=secure_sum.public_key(silo.gate.state.secure_key))


def release_key(gate, request, reply: RoundKeyReply) -> RoundKeyReply:
    """The public key of this run's key pair, and nothing else."""
    if not np.array_equal(np.asarray(reply.public_key), secure_sum.public_key(gate.state.secure_key)):
        raise DisclosureError(f"silo {gate.silo.name!r}: a key reply carries only the run's public key")
    return reply


def _admit_peer_keys(gate, request: RoundStartRequest) -> None:
    """The key set of the secure sum: one distinct 32-byte key per announced silo, this silo's own at its
    index. Logged by fingerprint, so that the operators can compare their key sets out of band."""
    if not gate.state.secure_key:
        raise NotFittedError(f"silo {gate.silo.name!r}: a secure round start came before its key request")
    keys = np.asarray(request.peer_keys)
    n, index = gate.state.secure_n_silos, int(request.peer_index)
    if keys.dtype != np.uint8 or keys.shape != (n, PUBLIC_KEY_BYTES) or len({k.tobytes() for k in keys}) != n:
        raise ConfigError(f"round start: peer_keys must be {n} distinct {PUBLIC_KEY_BYTES}-byte keys (uint8, one row "
                          "per silo)")
    if not (0 <= index < n and np.array_equal(keys[index], secure_sum.public_key(gate.state.secure_key))):
        raise DisclosureError(f"silo {gate.silo.name!r}: the round start's key set does not hold this silo's key "
                              "at its index")
    gate.state.secure_secrets = secure_sum.pair_secrets(gate.state.secure_key, keys, index)
    gate.state.secure_index = index
    silo_log.info("silo %r: the rounds' counts are masked (secure aggregation over %d silos, key set %s)",
                  gate.silo.name, n, secure_sum.fingerprint(keys))


def _bind_mask(gate, request, round_number: int) -> None:
    """The mask of this round's reply is bound to the request as the server sent it (before any floor) and
    to its round, which must be later than every round masked before in this run."""
    if round_number <= gate.state.secure_round:
        raise DisclosureError(f"silo {gate.silo.name!r}: round {round_number} comes after round "
                              f"{gate.state.secure_round}; under secure aggregation each round is answered once, "
                              "in order (two masked tables under one mask would give their difference away)")
    gate.state.secure_round = round_number
    gate.state.secure_digest = secure_sum.request_digest(request).hex()


def release_counts(gate, request, reply: RoundCountsReply) -> RoundCountsReply | RoundMaskedCountsReply:
    """A round's counts: the rules of every count table (the minimum cluster size per component, DP noise,
    suppression and rounding; ``protect_table``). In the analyst's own session (``whole_round_counts``)
    without suppression, rounding or noise set, they are released whole. Under secure aggregation the table
    so protected leaves masked: the same limits, and the server sees only the sum."""
    if not (gate.policy.whole_round_counts and unprotected(gate)):
        cluster, modality = protect_table(gate, reply.cluster, reply.modality)
        reply = dataclasses.replace(reply, cluster=cluster, modality=modality)
    if not gate.state.secure_secrets:
        return reply
    st = gate.state
    return RoundMaskedCountsReply(masked=secure_sum.mask(pack_counts(reply.cluster, reply.modality),
                                                         st.secure_secrets, st.secure_index,
                                                         bytes.fromhex(st.secure_digest)))


# -- births ------------------------------------------------------------------------------------------------

def _birth_share(what: str, share, *, required: bool) -> None:
    from vcmc.config.options import MAX_BIRTH_SHARE

    share = float(share)
    if not (np.isfinite(share) and (0.0 < share <= MAX_BIRTH_SHARE or (share == 0.0 and not required))):
        raise ConfigError(f"{what}: the share of worst-explained rows must be a float in (0, {MAX_BIRTH_SHARE:g}]; "
                          f"got {share!r}")


def admit_birth(gate, request: RoundBirthRequest) -> RoundBirthRequest:
    _secure_only(gate, request)
    _birth_share("round birth", request.share, required=True)
    return request


def answer_birth(silo, request: RoundBirthRequest) -> RoundBirthReply:
    return RoundBirthReply(counts=rounds.birth(silo, float(request.share)))


def release_birth(gate, request, reply: RoundBirthReply) -> RoundBirthReply:
    """Per profile column, the silo's worst-explained rows whose least probable value it is: a vector of
    counts, released with the limits of every count outside the analyst's own session (DP noise, the minimum
    cluster size, suppression, rounding) and whole in it, as the rounds' tables are."""
    if gate.policy.whole_round_counts and unprotected(gate):
        return reply
    counts = noised_vector(gate, reply.counts)
    counts = withhold(protect_vector(gate, withhold(counts, gate.min_size)), gate.min_size)
    return dataclasses.replace(reply, counts=counts.astype(np.float64))


def _admit_births(gate, request: RoundStartRequest) -> None:
    """The births of a round start: distinct profile columns, each to a component of the start, a share in
    range (the misfits are the silo's own computation from its labels and the profiles it labelled with)."""
    cols = np.asarray(request.birth_columns if request.birth_columns is not None else [], dtype=np.float64).ravel()
    comps = np.asarray(request.birth_components if request.birth_components is not None else [],
                       dtype=np.float64).ravel()
    _birth_share("round start", request.birth_share, required=cols.size > 0)
    n_comp = int(request.n_components)
    if (cols.size != comps.size or np.unique(cols).size != cols.size or np.any(cols != np.round(cols))
            or np.any(comps != np.round(comps)) or (cols.size and (cols.min() < 0 or cols.max() >= gate.silo.n_columns
                                                                   or comps.min() < 0 or comps.max() >= n_comp))):
        raise ConfigError(f"round start: birth_columns must be distinct profile columns in [0, "
                          f"{gate.silo.n_columns}) and birth_components as many components in [0, {n_comp})")


# -- start, sweeps, finish ----------------------------------------------------------------------------------

def admit_start(gate, request: RoundStartRequest) -> RoundStartRequest:
    _secure_only(gate, request)
    rc.cap("round start", clusters=int(request.n_components), max_clusters=gate.policy.max_clusters)
    rc.cap("round start", clusters=np.asarray(request.start).size, max_clusters=gate.policy.max_clusters)
    _admit_births(gate, request)
    prior = float(request.silo_weight_prior)
    if not (np.isfinite(prior) and prior >= 0):
        raise ConfigError(f"round start: silo_weight_prior must be a finite float >= 0; got {prior!r}")
    if request.peer_keys is not None:
        _admit_peer_keys(gate, request)
        _bind_mask(gate, request, 1)
    elif "rounds" not in gate.policy.allowed_strategies:
        raise DisclosureError(f"silo {gate.silo.name!r}: its operator allows the rounds only under secure "
                              "aggregation ('secure-rounds'); this round start has no keys")
    else:       # plain rounds from here on (a later secure start needs a new key request)
        gate.state.secure_secrets = []
    gate.state.kept_round_profiles = []
    return request


def answer_start(silo, request: RoundStartRequest) -> RoundCountsReply:
    cluster, modality = rounds.start(silo, request.start, int(request.n_components),
                                     silo_weight_prior=float(request.silo_weight_prior),
                                     birth_share=float(request.birth_share), birth_columns=request.birth_columns,
                                     birth_components=request.birth_components)
    return RoundCountsReply(cluster=cluster, modality=modality)


def admit_sweep(gate, request: RoundSweepRequest) -> RoundSweepRequest:
    _secure_only(gate, request)
    if gate.state.secure_secrets:
        _bind_mask(gate, request, int(request.round))
    log_pi = np.asarray(request.log_pi, dtype=np.float64)
    log_prof = np.asarray(request.log_profiles, dtype=np.float64)
    if log_pi.ndim != 1 or log_prof.ndim != 2 or log_prof.shape[0] != log_pi.shape[0]:
        raise ConfigError("round sweep: log_pi must be (C,) and log_profiles (C, P) of the same components")
    rc.cap("round sweep", clusters=log_pi.shape[0], max_clusters=gate.policy.max_clusters)
    if not (np.all(np.isfinite(log_pi)) and np.all(np.isfinite(log_prof))):
        raise ConfigError("round sweep: log probabilities must be finite")
    if len(request.spawn_key) > 16:
        raise ConfigError("round sweep: the spawn key must be at most 16 numbers")
    if float(request.inverse_temperature) != 1.0 and not gate.policy.whole_round_counts:
        # a draw at inverse temperature g uses the profiles to the power g: it would undo the profile floor
        # below (floor^g), so outside the analyst's own session the rows are drawn at temperature 1 only
        raise DisclosureError(f"silo {gate.silo.name!r}: an annealed round sweep (inverse temperature other than "
                              "1) is answered only in the analyst's own session: it sharpens the profiles past "
                              "the profile floor (docs/federation.md)")
    rc.profiles("round sweep profiles", np.exp(log_prof), (log_pi.shape[0], gate.silo.n_columns),
                gate.silo.n_modalities, floor=0.0)
    if request.keep and gate.policy.whole_round_counts:
        gate.state.kept_round_profiles.append(digest_rows(log_prof.reshape(1, -1))[0])
    # the profile floor in log space (an honest draw's entries are far above it and pass unchanged)
    floor = np.log(gate.policy.profile_floor) if gate.policy.profile_floor > 0 else -np.inf
    if np.any(log_prof < floor):
        return dataclasses.replace(request, log_profiles=np.maximum(log_prof, floor))
    return request


def answer_sweep(silo, request: RoundSweepRequest) -> RoundCountsReply:
    cluster, modality = rounds.sweep(silo, int(request.round), request.log_pi, request.log_profiles,
                                     keep=bool(request.keep), seed_entropy=int(request.seed_entropy),
                                     spawn_key=request.spawn_key,
                                     inverse_temperature=float(request.inverse_temperature))
    return RoundCountsReply(cluster=cluster, modality=modality)


def admit_finish(gate, request: RoundFinishRequest) -> RoundFinishRequest:
    _secure_only(gate, request)
    return request


def answer_finish(silo, request: RoundFinishRequest) -> AssignReply:
    return AssignReply(**rounds.finish(silo, request.keep))


def release_finish(gate, request, reply: AssignReply) -> AssignReply:
    if gate.policy.whole_round_counts:
        # the rounds' labels in the analyst's own session: whole, as the rounds' counts are there (a silo's
        # few rows of a pooled cluster would otherwise be withheld from result.json while assignments.csv,
        # written in the same session, lists them)
        return reply
    return assign.release(gate, request, reply)


def after_finish(silo, request) -> None:
    """The rounds' labels replace the one-shot pass's in the silo's own files (once per run)."""
    silo.write_labels(rounds=True)


# -- split-merge moves and the assessment after the rounds (the analyst's own session only) ------------------

def admit_move(gate, request: RoundMoveRequest) -> RoundMoveRequest:
    """A split-merge proposal: answered only in the analyst's own session (its reply is a sum over rows at
    profiles the server chooses, and a split's counts are those of a sub-cluster the server drew; neither
    passes the limits of a deployment's count tables); components in range, profiles finite, rho a
    probability."""
    _secure_only(gate, request)
    if gate.state.secure_secrets:
        raise DisclosureError(f"silo {gate.silo.name!r}: a split-merge proposal is not answered under secure "
                              "aggregation (its reply is not a table the masks can carry)")
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: the rounds' split-merge moves are answered only in the "
                              "analyst's own session (docs/federation.md)")
    if request.kind not in ("merge", "split"):
        raise ConfigError(f"round move: kind must be 'merge' or 'split'; got {request.kind!r}")
    a, b = int(request.a), int(request.b)
    if a == b or min(a, b) < 0 or max(a, b) >= gate.policy.max_clusters:
        raise ConfigError(f"round move: a and b must be two different components below {gate.policy.max_clusters}")
    for name in ("log_profile_a", "log_profile_b"):
        v = np.asarray(getattr(request, name), dtype=np.float64)
        if v.shape != (gate.silo.n_columns,) or not np.all(np.isfinite(v)) or np.any(v > 0):
            raise ConfigError(f"round move: {name} must be {gate.silo.n_columns} finite log probabilities")
    lr, l1 = float(request.log_rho), float(request.log_1m_rho)
    if not (np.isfinite(lr) and np.isfinite(l1) and lr <= 0 and l1 <= 0
            and abs(np.logaddexp(lr, l1)) < 1e-9):
        raise ConfigError("round move: log_rho and log_1m_rho must be the logs of rho and 1 - rho")
    if len(request.spawn_key) > 16:
        raise ConfigError("round move: the spawn key must be at most 16 numbers")
    return request


def answer_move(silo, request: RoundMoveRequest) -> RoundMoveReply:
    log_q, cluster_b, modality_b = rounds.move(silo, request.kind, int(request.a), int(request.b),
                                               request.log_profile_a, request.log_profile_b,
                                               log_rho=float(request.log_rho), log_1m_rho=float(request.log_1m_rho),
                                               seed_entropy=int(request.seed_entropy), spawn_key=request.spawn_key)
    return RoundMoveReply(log_q=log_q, cluster_b=cluster_b, modality_b=modality_b)


def release_move(gate, request, reply: RoundMoveReply) -> RoundMoveReply:
    """A split-merge reply leaves only in the analyst's own session (its request is refused elsewhere)."""
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: a split-merge reply is sent only in the analyst's own "
                              "session")
    return reply


def admit_assess(gate, request: RoundAssessRequest) -> RoundAssessRequest:
    """The model assessment after the rounds: answered only in the analyst's own session (the profile draws
    must be kept rounds' draws this silo answered, but the weights are the server's); then the rules of an
    assess request (refused under DP; caps on draws and pairs; weights probabilities; the profiles floored
    where they are used, ``checks.kept_profiles``)."""
    if not gate.policy.whole_round_counts:
        raise DisclosureError(f"silo {gate.silo.name!r}: the assessment after the rounds is answered only in the "
                              "analyst's own session (docs/federation.md)")
    assess.refuse_under_dp(gate)
    log_prof = np.asarray(request.log_profiles, dtype=np.float64)
    keep = np.asarray(request.keep)
    pi = np.asarray(request.pi, dtype=np.float64)
    if log_prof.ndim != 3 or log_prof.shape[2] != gate.silo.n_columns or keep.ndim != 1 or keep.size < 1 \
            or keep.dtype.kind not in "iu" or keep.min() < 0 or keep.max() >= log_prof.shape[1] \
            or np.unique(keep).size != keep.size or pi.shape != (log_prof.shape[0], keep.size):
        raise ConfigError(f"round assess: log_profiles must be (R, C, {gate.silo.n_columns}) draws, keep distinct "
                          "components among the C, and pi (R, len(keep)) weights")
    rc.cap("round assess", draws=log_prof.shape[0], max_draws=gate.policy.max_draws)
    if not set(digest_rows(log_prof.reshape(log_prof.shape[0], -1))) <= set(gate.state.kept_round_profiles):
        raise DisclosureError(f"silo {gate.silo.name!r}: the round assess request uses profile draws that no kept "
                              "round of this run sent")
    assess.check_terms(gate, "round assess", pi, request.pairs, request.spawn_key)
    return request


def _kept_profiles(silo, request: RoundAssessRequest) -> np.ndarray:
    return rc.kept_profiles(request.log_profiles, request.keep, silo.n_modalities, floor=silo.gate.policy.profile_floor)


def answer_assess(silo, request: RoundAssessRequest):
    """An assess request at the kept rounds' profile draws restricted to the result's clusters, with the
    request's weights."""
    return assess.answer(silo, AssessRequest(pi=np.asarray(request.pi, dtype=np.float64),
                                             profiles=_kept_profiles(silo, request), pairs=request.pairs,
                                             seed_entropy=request.seed_entropy, spawn_key=request.spawn_key))


def release_assess(gate, request: RoundAssessRequest, reply):
    return assess.release_at(gate, reply, request.pi, lambda: _kept_profiles(gate.silo, request))


endpoint(RoundKeyRequest, admit=admit_key, answer=answer_key, release=release_key)
endpoint(RoundBirthRequest, admit=admit_birth, answer=answer_birth, release=release_birth)
endpoint(RoundStartRequest, admit=admit_start, answer=answer_start, release=release_counts)
endpoint(RoundSweepRequest, admit=admit_sweep, answer=answer_sweep, release=release_counts)
endpoint(RoundFinishRequest, admit=admit_finish, answer=answer_finish, release=release_finish, after=after_finish)
endpoint(RoundMoveRequest, admit=admit_move, answer=answer_move, release=release_move)
endpoint(RoundAssessRequest, admit=admit_assess, answer=answer_assess, release=release_assess)
