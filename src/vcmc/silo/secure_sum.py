"""The rounds' secure sums, the silo's half (docs/federation.md, "The rounds"; docs/design.md §16).

In a deployment the server only relays: every silo's vector reaches every silo, and each silo sums them
itself. What the server relays must be useless to it and unalterable by it:

- **Pinned keys.** Each silo has a static X25519 key pair (node config ``rounds-key``, made by
  ``vcmc.silo.secure_sum.new_key``) and its operator pins the public key of every other silo of the federation
  by name (``rounds-peers``). Silos i and j derive their pair secret from X25519 of their static keys and the
  run's context (HKDF-SHA256): no key travels through the server, so it cannot put its own in between.
- **The context** is a digest of the run's identity and of everything of the round start the server sends
  every silo alike (the participants, the whole start map, the plan, the seed): every secret and tag below is
  bound to it, so a server that sends silos different start requests gets vectors that neither cancel nor
  verify.
- **A group secret** the server does not know: at the start each silo draws 32 random bytes and sends them to
  each other silo encrypted under their pair secret (ChaCha20-Poly1305); the secret is the hash of all the
  shares. It keys the rounds' random streams (``vcmc.pooled.chain.Seeds``), the pads and the tags.
- **Masked vectors.** Silo i sends its packed counts plus ``sum_{j > i} m_ij - sum_{j < i} m_ji`` (pair masks,
  ChaCha20 streams keyed by the pair secret, the context and the round) plus its pad ``g_i`` (keyed by the
  group secret) modulo 2^64. The pair masks cancel in the sum over the silos; the pads do not, and only a silo
  can remove them: the server sees uniform noise, even in the sum. A silo sees the pooled sum, never another
  silo's vector unmasked (that would need two of that silo's pair secrets).
- **Tags.** Each vector carries HMAC-SHA256 under the group secret of the context, the round, the sender and
  the vector: a silo sums a round only when every participant's vector is there and verifies, so the server can
  neither alter one nor give silos different sets.

Written on ``cryptography``'s primitives (X25519, HKDF, HMAC, ChaCha20, ChaCha20-Poly1305; the library under
Flower's own SecAgg+) rather than with Flower's ``SecAggPlusWorkflow``: that workflow sums floating-point
parameters after clipping and quantising them (the rounds need exact counts), lets the server learn the sum
(here nobody but the silos may), relays unauthenticated public keys through the server, and seeds its masks'
generator with 32 bits (``flwr.common.secure_aggregation.secaggplus_utils.pseudo_rand_gen``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import numpy as np

from vcmc.exceptions import ConfigError, DisclosureError

KEY_BYTES = 32
SHARE_BYTES = 48          # a 32-byte share encrypted with its 16-byte Poly1305 tag
TAG_BYTES = 32
_INFO = b"vcmc rounds v2"


def _crypto():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import x25519
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as exc:   # pragma: no cover - the flower extra installs it
        raise ImportError("the rounds' secure sums need the 'cryptography' package (pip install 'vcmc[flower]')"
                          ) from exc
    return x25519, hashes, serialization, HKDF, Cipher, algorithms, ChaCha20Poly1305


# -- keys -----------------------------------------------------------------------------------------------------

def new_key() -> tuple[str, str]:
    """A fresh static key pair for a silo: ``(private hex, public hex)``. The operator keeps the private key on
    the silo's host (node config ``rounds-key`` names its file) and gives the public key to the other operators."""
    x25519, _, serialization, *_ = _crypto()
    key = x25519.X25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
    return private.hex(), key.public_key().public_bytes_raw().hex()


def public_of(private_hex: str) -> str:
    x25519, *_ = _crypto()
    return x25519.X25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex)).public_key().public_bytes_raw().hex()


def read_private_key(path) -> str:
    """The silo's private key from its file (hex); errors name the file, never its content."""
    try:
        text = Path(str(path)).read_text(encoding="utf-8").strip()
        if len(bytes.fromhex(text)) != KEY_BYTES:
            raise ValueError
    except (OSError, ValueError):
        raise ConfigError(f"node config 'rounds-key': {str(path)!r} is not a readable file holding a 32-byte "
                          "hex key (make one with 'vcmc keygen')") from None
    return text


def parse_peers(value) -> dict[str, str]:
    """``rounds-peers``: comma-separated ``name=public-key-hex`` (or a file holding them, one per line)."""
    text = str(value or "").strip()
    if text and "=" not in text and Path(text).is_file():
        text = Path(text).read_text(encoding="utf-8").replace("\n", ",")
    out = {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        name, _, key = item.partition("=")
        try:
            if len(bytes.fromhex(key.strip())) != KEY_BYTES:
                raise ValueError
        except ValueError:
            raise ConfigError(f"node config 'rounds-peers': the key of {name.strip()!r} is not 32 bytes of hex"
                              ) from None
        out[name.strip()] = key.strip().lower()
    return out


def fingerprint(public_hex: str) -> str:
    """A short digest of a public key, for the operators' logs and the hello reply."""
    return hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()[:16]


# -- the context and the secrets ----------------------------------------------------------------------------

def context_digest(run_key: str, fields) -> bytes:
    """SHA-256 of the run's identity and the start request's common fields (name, dtype, shape and bytes of
    each, in name order)."""
    h = hashlib.sha256(_INFO + b"\0" + str(run_key).encode() + b"\0")
    for key, value in sorted(fields.items()):
        h.update(key.encode() + b"\0")
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            h.update(f"{arr.dtype.str}{arr.shape}".encode() + b"\0" + arr.tobytes())
        else:
            h.update(repr(value).encode() + b"\0")
    return h.digest()


def pair_secrets(private_hex: str, peer_publics: list[str], index: int, context: bytes) -> list[bytes]:
    """The secret this silo shares with every other participant (``b""`` at its own index): X25519 of the
    static keys, then HKDF-SHA256 over the two public keys in sorted order and the context."""
    x25519, hashes, _, HKDF, *_ = _crypto()
    private = x25519.X25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    own = bytes.fromhex(peer_publics[index])
    out = []
    for j, other_hex in enumerate(peer_publics):
        if j == index:
            out.append(b"")
            continue
        other = bytes.fromhex(other_hex)
        lo, hi = sorted((own, other))
        shared = private.exchange(x25519.X25519PublicKey.from_public_bytes(other))
        out.append(HKDF(algorithm=hashes.SHA256(), length=32, salt=context, info=_INFO + lo + hi).derive(shared))
    return out


def new_share() -> bytes:
    return os.urandom(KEY_BYTES)


def _aead(secret: bytes):
    *_, aead = _crypto()
    return aead(hmac.new(secret, b"share", hashlib.sha256).digest())


def encrypt_share(share: bytes, secrets: list[bytes], index: int) -> np.ndarray:
    """(S, 48) uint8: this silo's share encrypted to every other participant (zeros at its own index)."""
    out = np.zeros((len(secrets), SHARE_BYTES), dtype=np.uint8)
    for j, secret in enumerate(secrets):
        if j != index:
            ad = f"{index}>{j}".encode()
            out[j] = np.frombuffer(_aead(secret).encrypt(b"\0" * 12, share, ad), dtype=np.uint8)
    return out


def group_secret(own_share: bytes, shares: np.ndarray, secrets: list[bytes], index: int, context: bytes,
                 *, silo: str) -> bytes:
    """The group secret from every participant's share: ``shares`` (S, S, 48), row i the shares silo i sent
    (its row j encrypted to silo j). Refuses a share that does not decrypt: the server altered or withheld it."""
    from cryptography.exceptions import InvalidTag

    plain = []
    for i, secret in enumerate(secrets):
        if i == index:
            plain.append(own_share)
            continue
        try:
            plain.append(_aead(secret).decrypt(b"\0" * 12, np.ascontiguousarray(shares[i, index]).tobytes(),
                                               f"{i}>{index}".encode()))
        except InvalidTag:
            raise DisclosureError(f"silo {silo!r}: the share relayed from participant {i} does not decrypt under "
                                  "its pinned key (altered, withheld or from another run)") from None
    return hashlib.sha256(context + b"".join(plain)).digest()


def seed_entropy(group: bytes) -> int:
    """The rounds' seed entropy from the group secret (``vcmc.pooled.chain.Seeds``)."""
    return int.from_bytes(hmac.new(group, b"seed", hashlib.sha256).digest(), "big")


# -- vectors --------------------------------------------------------------------------------------------------

def _stream(key: bytes, n: int) -> np.ndarray:
    _, _, _, _, cipher, algorithms, _ = _crypto()
    enc = cipher(algorithms.ChaCha20(key, b"\0" * 16), mode=None).encryptor()
    return np.frombuffer(enc.update(b"\0" * (8 * n)), dtype=np.uint64)


def _key(secret: bytes, context: bytes, round_number: int, what: bytes) -> bytes:
    return hmac.new(secret, context + what + int(round_number).to_bytes(8, "big", signed=True), hashlib.sha256).digest()


def pad(group: bytes, context: bytes, round_number: int, index: int, n: int) -> np.ndarray:
    return _stream(_key(group, context, round_number, b"pad" + int(index).to_bytes(4, "big")), n)


def mask(packed: np.ndarray, secrets: list[bytes], group: bytes, index: int, context: bytes,
         round_number: int) -> np.ndarray:
    """The silo's masked vector (uint64) of the int64 vector ``packed``: its pair masks with every other
    participant added where its index is below the other's and subtracted above, and its pad, modulo 2^64."""
    out = np.asarray(packed, dtype=np.int64).view(np.uint64).copy()
    for j, secret in enumerate(secrets):
        if j == index:
            continue
        m = _stream(_key(secret, context, round_number, b"mask"), out.size)
        out = out + m if index < j else out - m        # unsigned arithmetic wraps: modulo 2^64 is the point
    return out + pad(group, context, round_number, index, out.size)


def tag(group: bytes, context: bytes, round_number: int, index: int, vector: np.ndarray) -> np.ndarray:
    """(32,) uint8: the vector's tag (HMAC-SHA256 under the group secret)."""
    key = _key(group, context, round_number, b"tag" + int(index).to_bytes(4, "big"))
    return np.frombuffer(hmac.new(key, np.ascontiguousarray(vector, dtype=np.uint64).tobytes(), hashlib.sha256)
                         .digest(), dtype=np.uint8).copy()


def unmasked_sum(vectors: np.ndarray, tags: np.ndarray, group: bytes, context: bytes, round_number: int, *,
                 silo: str) -> np.ndarray:
    """The pooled int64 vector of a round from every participant's masked vector (S, L): each tag verified
    (otherwise refused, naming the participant), the vectors summed and the pads removed, modulo 2^64."""
    vectors = np.ascontiguousarray(vectors, dtype=np.uint64)
    tags = np.asarray(tags, dtype=np.uint8)
    if tags.shape != (vectors.shape[0], TAG_BYTES):
        raise DisclosureError(f"silo {silo!r}: round {round_number} relays {tags.shape[0]} tags for "
                              f"{vectors.shape[0]} vectors")
    acc = np.zeros(vectors.shape[1], dtype=np.uint64)
    for i in range(vectors.shape[0]):
        if not hmac.compare_digest(tag(group, context, round_number, i, vectors[i]).tobytes(), tags[i].tobytes()):
            raise DisclosureError(f"silo {silo!r}: round {round_number}'s vector of participant {i} does not verify "
                                  "(altered, replayed or from another run): the round is refused")
        acc += vectors[i] - pad(group, context, round_number, i, vectors.shape[1])
    return acc.view(np.int64)
