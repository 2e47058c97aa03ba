"""Secure aggregation of the rounds' count tables, the silo's half (docs/design.md §16, "Secure aggregation").

Pairwise masking, the core of SecAgg (Bonawitz et al. 2017, the protocol behind Flower's SecAgg+): silos i
and j agree a secret ``k_ij`` by X25519 Diffie-Hellman over the public keys the server relays, and in round r
silo i sends its packed table (``vcmc.protocol.rounds.pack_counts``) plus ``sum_{j > i} m_ij(r) - sum_{j < i}
m_ji(r)`` modulo 2^64, where ``m_ij(r)`` is a ChaCha20 key stream keyed by ``HMAC-SHA256(k_ij, digest of the
round's request)``. Each mask enters once with + and once with -, so the silos' vectors sum to the sum of
their tables; a single silo's vector is uniform to anyone without two of its pair secrets.

- The mask is bound to the request: the digest covers everything the server sends every silo alike (the
  round, the weights and profiles, the seed), not the per-silo spawn key or start map. A server that sends
  one silo other parameters than the rest (to isolate its table in the sum) gets masks that do not cancel:
  a sum of uniform noise, which the server's check refuses (``vcmc.rounds.secure_sum``).
- A round is answered once, in increasing order (the gate, ``vcmc.silo.gate``): two masked tables under the
  same mask would give their difference away.
- No dropout recovery (no Shamir shares of the secrets): every silo is required in every round
  (``vcmc.rounds.stage``; a lost silo ends the run), so no pair mask is ever revealed, and SecAgg's self
  masks, which guard a late reply once its pair masks were revealed for the recovery, are not needed.

Written on ``cryptography``'s primitives (X25519, HKDF, HMAC, ChaCha20; the library Flower's SecAgg+ uses)
rather than with Flower's ``SecAggPlusWorkflow``: that workflow averages floating-point model parameters
after clipping them to a range and quantising them (the counts would not sum exactly, and exact sums are what
keep the rounds the pooled sampler), takes four message exchanges per round where this takes none beyond the
round's own, runs only inside the legacy strategy's fit rounds, and seeds its masks' generator with 32 bits
(``flwr.common.secure_aggregation.secaggplus_utils.pseudo_rand_gen``), a space a server can search.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

_INFO = b"vcmc rounds secure sum v1"
_PER_SILO_FIELDS = ("spawn_key", "start", "peer_index")   # what legitimately differs between the silos' requests


def _x25519():
    try:
        from cryptography.hazmat.primitives.asymmetric import x25519
    except ImportError as exc:   # pragma: no cover - the flower extra installs it
        raise ImportError("secure aggregation of the rounds needs the 'cryptography' package "
                          "(pip install 'vcmc[flower]')") from exc
    return x25519


def new_private_key() -> str:
    """A fresh X25519 private key, as hex (kept in the silo's gate state; never sent)."""
    from cryptography.hazmat.primitives import serialization

    key = _x25519().X25519PrivateKey.generate()
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption()).hex()


def public_key(private_hex: str) -> np.ndarray:
    """(32,) uint8: the public key of ``private_hex``."""
    key = _x25519().X25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    return np.frombuffer(key.public_key().public_bytes_raw(), dtype=np.uint8).copy()


def fingerprint(peer_keys: np.ndarray) -> str:
    """A short digest of the whole key set (the silos' operators can compare it out of band: a server that
    substituted a key shows a different fingerprint in one silo's log)."""
    return hashlib.sha256(np.ascontiguousarray(peer_keys, dtype=np.uint8).tobytes()).hexdigest()[:16]


def request_digest(request) -> bytes:
    """SHA-256 of the fields the server sends every silo alike (``to_arrays`` without the per-silo ones), in
    a canonical order: names, dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for key, value in sorted(request.to_arrays().items()):
        if key in _PER_SILO_FIELDS:
            continue
        h.update(key.encode() + b"\0")
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            h.update(f"{arr.dtype.str}{arr.shape}".encode() + b"\0" + arr.tobytes())
        else:
            h.update(repr(value).encode() + b"\0")
    return h.digest()


def pair_secrets(private_hex: str, peer_keys: np.ndarray, index: int) -> list[str]:
    """The secret this silo shares with every other silo of ``peer_keys`` (S, 32), as hex ("" at its own
    index): X25519 then HKDF-SHA256 over the pair's two public keys in sorted order, so both ends derive the
    same secret. Computed once per run (at the round start) and kept with the private key."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    x = _x25519()
    private = x.X25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    keys = np.ascontiguousarray(peer_keys, dtype=np.uint8)
    own = keys[index].tobytes()
    out = []
    for j in range(keys.shape[0]):
        if j == index:
            out.append("")
            continue
        other = keys[j].tobytes()
        lo, hi = sorted((own, other))
        shared = private.exchange(x.X25519PublicKey.from_public_bytes(other))
        out.append(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + lo + hi).derive(shared).hex())
    return out


def _stream(secret: bytes, digest: bytes, n: int) -> np.ndarray:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    key = hmac.new(secret, digest, hashlib.sha256).digest()
    enc = Cipher(algorithms.ChaCha20(key, b"\0" * 16), mode=None).encryptor()
    return np.frombuffer(enc.update(b"\0" * (8 * n)), dtype=np.uint64)


def mask(packed: np.ndarray, secrets: list[str], index: int, digest: bytes) -> np.ndarray:
    """The silo's masked vector (uint64) of the int64 vector ``packed``: its pair masks with every other silo
    (``pair_secrets``) added where its index is below the other's and subtracted above, modulo 2^64."""
    out = np.asarray(packed, dtype=np.int64).view(np.uint64).copy()
    for j, secret in enumerate(secrets):
        if j == index:
            continue
        m = _stream(bytes.fromhex(secret), digest, out.size)
        out = out + m if index < j else out - m        # unsigned arithmetic wraps: modulo 2^64 is the point
    return out
