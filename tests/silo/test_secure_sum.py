"""Secure aggregation of the rounds' tables, the silo's half: the masks cancel in the sum and only there, are
bound to the request, and the gate answers a masked round once, in order, only with the run's keys."""

import numpy as np
import pytest

pytest.importorskip("cryptography")

from vcmc.exceptions import ConfigError, DisclosureError, InconsistentSiloSummaries  # noqa: E402
from vcmc.protocol.rounds import (  # noqa: E402
    RoundCountsReply,
    RoundKeyRequest,
    RoundMaskedCountsReply,
    RoundMoveRequest,
    RoundStartRequest,
    RoundSweepRequest,
    pack_counts,
    unpack_counts,
)
from vcmc.rounds.secure_sum import total  # noqa: E402
from vcmc.silo import secure_sum as ss  # noqa: E402
from vcmc.silo.policy import SiloPolicy  # noqa: E402

from .test_rounds import _draw, _ready  # noqa: E402


@pytest.fixture(scope="module")
def silo_data():
    from vcmc.research.simulate import simulate_design

    return simulate_design("homogeneous", "easy", rng=5, n_per_silo=200).silos[0]


def _keys(n):
    private = [ss.new_private_key() for _ in range(n)]
    return private, np.stack([ss.public_key(p) for p in private])


def test_the_masks_cancel_in_the_sum_and_hide_each_table():
    rng = np.random.default_rng(0)
    private, public = _keys(4)
    tables = [(rng.integers(0, 50, 6).astype(float), rng.integers(0, 50, (6, 9)).astype(float)) for _ in range(4)]
    digest = b"round 7"
    masked = {f"s{i}": RoundMaskedCountsReply(masked=ss.mask(pack_counts(*t), ss.pair_secrets(private[i], public, i),
                                                               i, digest))
              for i, t in enumerate(tables)}
    cluster, modality = total(masked, 6, "round 7")
    np.testing.assert_array_equal(cluster, sum(t[0] for t in tables))
    np.testing.assert_array_equal(modality, sum(t[1] for t in tables))
    # one silo's vector says nothing of its table: its entries are spread over the whole 2^64 range
    one = masked["s0"].masked.astype(np.float64)
    assert np.median(one) > 2.0**60 and not np.array_equal(unpack_counts(masked["s0"].masked.view(np.int64), 6)[0],
                                                            tables[0][0])


def test_a_silo_sent_another_request_breaks_the_sum_and_the_server_says_so():
    private, public = _keys(3)
    packed = pack_counts(np.ones(2), np.ones((2, 3)))
    digests = [b"a", b"a", b"b"]          # the third silo was sent other parameters than the first two
    masked = {f"s{i}": RoundMaskedCountsReply(masked=ss.mask(packed, ss.pair_secrets(private[i], public, i), i, d))
              for i, d in enumerate(digests)}
    with pytest.raises(InconsistentSiloSummaries, match="did not cancel"):
        total(masked, 2, "round 3")


def test_the_digest_covers_what_every_silo_is_sent_alike_and_not_the_per_silo_fields(silo_data):
    silo, _ = _ready(silo_data)
    log_pi, log_prof = _draw(silo, 3)
    base = dict(round=4, log_pi=log_pi, log_profiles=log_prof, keep=False, seed_entropy=9)
    a = ss.request_digest(RoundSweepRequest(**base, spawn_key=(3, 4, 0)))
    assert a == ss.request_digest(RoundSweepRequest(**base, spawn_key=(3, 4, 1)))
    other = log_pi.copy()
    other[0] += 1e-12
    assert a != ss.request_digest(RoundSweepRequest(**{**base, "log_pi": other}, spawn_key=(3, 4, 0)))
    assert a != ss.request_digest(RoundSweepRequest(**{**base, "round": 5}, spawn_key=(3, 4, 0)))


def _secure_start(silo, k, c, n_silos=2):
    key = silo.handle(RoundKeyRequest(n_silos=n_silos))
    peers = np.stack([key.public_key, *[ss.public_key(ss.new_private_key()) for _ in range(n_silos - 1)]])
    return silo.handle(RoundStartRequest(start=np.arange(k) % c, n_components=c, peer_keys=peers, peer_index=0))


def test_under_secure_aggregation_every_counts_reply_leaves_masked(silo_data):
    silo, k = _ready(silo_data)
    c = k + 1
    start = _secure_start(silo, k, c)
    assert isinstance(start, RoundMaskedCountsReply) and start.masked.dtype == np.uint64
    log_pi, log_prof = _draw(silo, c)
    reply = silo.handle(RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=True, seed_entropy=3,
                                          spawn_key=(3, 2, 0)))
    assert isinstance(reply, RoundMaskedCountsReply) and not isinstance(reply, RoundCountsReply)
    assert reply.masked.size == c + c * int(np.sum(silo.n_modalities))


def test_a_masked_round_is_answered_once_and_in_order(silo_data):
    silo, k = _ready(silo_data)
    c = k + 1
    _secure_start(silo, k, c)
    log_pi, log_prof = _draw(silo, c)

    def sweep(r, lp=log_pi):
        return silo.handle(RoundSweepRequest(round=r, log_pi=lp, log_profiles=log_prof, keep=False, seed_entropy=3,
                                             spawn_key=(3, r, 0)))

    sweep(2)
    # the same round again (at other weights: the difference of the two masked tables would be the
    # difference of the tables) and an earlier one are refused
    with pytest.raises(DisclosureError, match="answered once, in order"):
        sweep(2, log_pi[::-1].copy())
    with pytest.raises(DisclosureError, match="answered once, in order"):
        sweep(1)
    sweep(5)


def test_a_deployment_that_allows_only_secure_rounds_refuses_plain_ones(silo_data):
    policy = SiloPolicy(allowed_strategies=("contingency", "secure-rounds"), require_announcement=False,
                        budget={"round_start": 2})     # the refused plain start spends one
    silo, k = _ready(silo_data, policy)
    with pytest.raises(DisclosureError, match="only under secure aggregation"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=k))
    log_pi, log_prof = _draw(silo, k)
    with pytest.raises(DisclosureError, match="only under secure aggregation"):
        silo.handle(RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=False, seed_entropy=3,
                                      spawn_key=(3, 2, 0)))
    assert isinstance(_secure_start(silo, k, k), RoundMaskedCountsReply)


def test_key_set_checks_and_no_split_merge_under_secure_aggregation(silo_data):
    silo, k = _ready(silo_data)
    c = k + 1
    strangers = np.stack([ss.public_key(ss.new_private_key()) for _ in range(2)])
    with pytest.raises(Exception, match="before its key request"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=c, peer_keys=strangers, peer_index=0))
    silo.handle(RoundKeyRequest(n_silos=2))
    # a key set that does not hold this silo's own key at its index (a server that substituted it)
    with pytest.raises(DisclosureError, match="does not hold this silo's key"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=c, peer_keys=strangers, peer_index=0))
    with pytest.raises(ConfigError, match="distinct"):
        silo.handle(RoundStartRequest(start=np.arange(k), n_components=c, peer_keys=strangers[:1], peer_index=0))
    with pytest.raises(ConfigError, match="2 to"):
        silo.handle(RoundKeyRequest(n_silos=1))
    silo2, k2 = _ready(silo_data)
    _secure_start(silo2, k2, k2 + 1)
    log_pi, log_prof = _draw(silo2, k2 + 1)
    with pytest.raises(DisclosureError, match="not answered under secure aggregation"):
        silo2.handle(RoundMoveRequest(kind="merge", a=0, b=1, log_profile_a=log_prof[0], log_profile_b=log_prof[1],
                                      log_rho=np.log(0.5), log_1m_rho=np.log(0.5), seed_entropy=1,
                                      spawn_key=(3, 2, 0, 1)))


def test_the_keys_survive_the_silos_state_between_messages(silo_data):
    from vcmc.silo.local import LocalSilo

    silo, k = _ready(silo_data)
    c = k + 1
    _secure_start(silo, k, c)
    state = silo.export_state()
    again = LocalSilo(silo_data, run_key="run-1")
    again.restore_state(state)
    assert again.gate.state.secure_secrets == silo.gate.state.secure_secrets
    log_pi, log_prof = _draw(silo, c)
    req = RoundSweepRequest(round=2, log_pi=log_pi, log_profiles=log_prof, keep=False, seed_entropy=3,
                            spawn_key=(3, 2, 0))
    np.testing.assert_array_equal(again.handle(req).masked, silo.handle(req).masked)


def test_a_plain_start_after_secure_rounds_gives_plain_counts_and_a_new_key_pair_new_masks(silo_data):
    silo, k = _ready(silo_data)
    c = k + 1
    _secure_start(silo, k, c)
    assert isinstance(silo.handle(RoundStartRequest(start=np.arange(k) % c, n_components=c)), RoundCountsReply)
    first = silo.gate.state.secure_key
    # a second secure start under the same keys would reuse masks: it needs a new key pair, which counts afresh
    assert isinstance(_secure_start(silo, k, c), RoundMaskedCountsReply)
    assert silo.gate.state.secure_key != first and silo.gate.state.secure_round == 1
