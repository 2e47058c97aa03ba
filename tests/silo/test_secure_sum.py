"""The rounds' secure sums, the silo's half (vcmc.silo.secure_sum): pinned keys, the group secret, masked and
padded vectors that only the silos can sum, and tags the server cannot forge."""

import numpy as np
import pytest

pytest.importorskip("cryptography")

from vcmc.exceptions import DisclosureError  # noqa: E402
from vcmc.silo import secure_sum  # noqa: E402

CONTEXT = secure_sum.context_digest("run-1", {"names": ("a", "b", "c"), "n_components": 4})


@pytest.fixture(scope="module")
def three():
    """Three silos' static keys, pair secrets and group secret (each derived as the silo itself would)."""
    keys = [secure_sum.new_key() for _ in range(3)]
    publics = [k[1] for k in keys]
    secrets = [secure_sum.pair_secrets(k[0], publics, i, CONTEXT) for i, k in enumerate(keys)]
    shares = [secure_sum.new_share() for _ in range(3)]
    sent = np.stack([secure_sum.encrypt_share(shares[i], secrets[i], i) for i in range(3)])     # (S, S, 48)
    groups = [secure_sum.group_secret(shares[i], sent, secrets[i], i, CONTEXT, silo=f"s{i}") for i in range(3)]
    return keys, secrets, groups, sent


def test_pair_secrets_agree_between_the_two_ends_and_differ_between_pairs(three):
    _, secrets, _, _ = three
    assert secrets[0][1] == secrets[1][0] and secrets[0][2] == secrets[2][0] and secrets[1][2] == secrets[2][1]
    assert len({secrets[0][1], secrets[0][2], secrets[1][2]}) == 3
    other = secure_sum.context_digest("run-2", {"names": ("a", "b", "c"), "n_components": 4})
    keys, *_ = three
    again = secure_sum.pair_secrets(keys[0][0], [k[1] for k in keys], 0, other)
    assert again[1] != secrets[0][1]                          # bound to the run's context


def test_every_silo_derives_the_same_group_secret_and_an_altered_share_is_refused(three):
    _, secrets, groups, sent = three
    assert groups[0] == groups[1] == groups[2]
    forged = sent.copy()
    forged[1, 0, 5] ^= 1                                      # the server flips a bit of silo 1's share to silo 0
    with pytest.raises(DisclosureError, match="participant 1 does not decrypt"):
        secure_sum.group_secret(b"\0" * 32, forged, secrets[0], 0, CONTEXT, silo="s0")


def test_the_vectors_sum_to_the_pooled_table_only_for_the_silos(three):
    _, secrets, groups, _ = three
    rng = np.random.default_rng(0)
    tables = [rng.integers(0, 50, size=30) for _ in range(3)]
    vectors = np.stack([secure_sum.mask(t, secrets[i], groups[i], i, CONTEXT, 5) for i, t in enumerate(tables)])
    tags = np.stack([secure_sum.tag(groups[i], CONTEXT, 5, i, vectors[i]) for i in range(3)])
    pooled = secure_sum.unmasked_sum(vectors, tags, groups[0], CONTEXT, 5, silo="s0")
    np.testing.assert_array_equal(pooled, np.sum(tables, axis=0))
    # the server, without the group secret: the vectors' own sum is noise, far from any count
    assert np.all(np.abs(vectors.sum(axis=0, dtype=np.uint64).view(np.int64).astype(float)) > 2.0**40)
    # one silo's vector says nothing either: its pair masks (which a single other silo cannot remove) and pad
    assert np.all(np.abs((vectors[0] - secure_sum.pad(groups[1], CONTEXT, 5, 0, 30)).view(np.int64).astype(float))
                  > 2.0**40)


@pytest.mark.parametrize("tamper", ["alter", "replay", "reorder", "other-run"])
def test_a_vector_the_server_altered_replayed_or_moved_is_refused(three, tamper):
    _, secrets, groups, _ = three
    rng = np.random.default_rng(1)
    tables = [rng.integers(0, 50, size=12) for _ in range(3)]

    def round_of(r, context=CONTEXT):
        v = np.stack([secure_sum.mask(t, secrets[i], groups[i], i, context, r) for i, t in enumerate(tables)])
        return v, np.stack([secure_sum.tag(groups[i], context, r, i, v[i]) for i in range(3)])

    vectors, tags = round_of(6)
    if tamper == "alter":
        vectors[2, 3] += np.uint64(1000)                      # 1000 more rows of one kind in silo 2's table
    elif tamper == "replay":
        vectors, tags = round_of(5)                           # last round's vectors as this round's
    elif tamper == "reorder":
        vectors, tags = vectors[[1, 0, 2]], tags[[1, 0, 2]]
    else:
        vectors, tags = round_of(6, secure_sum.context_digest("run-9", {}))
    with pytest.raises(DisclosureError, match="does not verify"):
        secure_sum.unmasked_sum(vectors, tags, groups[0], CONTEXT, 6, silo="s0")


def test_keys_are_read_and_named_by_file_and_peer(tmp_path):
    from vcmc.exceptions import ConfigError

    private, public = secure_sum.new_key()
    (tmp_path / "key").write_text(private)
    assert secure_sum.read_private_key(tmp_path / "key") == private
    assert secure_sum.public_of(private) == public
    (tmp_path / "bad").write_text("not hex")
    with pytest.raises(ConfigError, match="'rounds-key'.*bad"):
        secure_sum.read_private_key(tmp_path / "bad")
    assert secure_sum.parse_peers(f"a={public}, b={public}") == {"a": public, "b": public}
    (tmp_path / "peers").write_text(f"a={public}\nb={public}\n")
    assert secure_sum.parse_peers(str(tmp_path / "peers")) == {"a": public, "b": public}
    with pytest.raises(ConfigError, match="'b' is not 32 bytes"):
        secure_sum.parse_peers(f"a={public},b=abcd")
