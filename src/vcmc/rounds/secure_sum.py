"""Secure aggregation of the rounds' count tables, the server's half (docs/design.md §16, "Secure aggregation"):
the masked vectors of all silos summed modulo 2^64, which leaves the sum of their tables (the masks cancel;
``vcmc.silo.secure_sum`` builds them). The server never holds a silo's table.
"""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import ConfigError, InconsistentSiloSummaries
from vcmc.protocol.rounds import PUBLIC_KEY_BYTES, RoundMaskedCountsReply, unpack_counts

PLAUSIBLE = 2.0**48
"""Largest count a true sum can hold here (2.8e14 rows). Masks that did not cancel leave entries uniform over
the 2^64 residues, so a whole table under this bound by chance has probability about 2^-15 per entry."""


def require_available() -> None:
    """Secure aggregation needs ``cryptography`` in the silos (checked there) and here: before sampling."""
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:   # pragma: no cover - the flower extra installs it
        raise ConfigError("aggregation.round_secure_sum needs the 'cryptography' package "
                          "(pip install 'vcmc[flower]')") from exc


def public_keys(replies, names) -> np.ndarray:
    """(S, 32) uint8: the silos' public keys in the run's silo order; every key distinct."""
    keys = np.stack([np.asarray(replies[n].public_key, dtype=np.uint8).ravel() for n in names])
    if keys.shape[1] != PUBLIC_KEY_BYTES or len({k.tobytes() for k in keys}) != len(names):
        raise InconsistentSiloSummaries(f"secure aggregation: the silos' public keys must be distinct "
                                        f"{PUBLIC_KEY_BYTES}-byte X25519 keys")
    return keys


def total(replies, n_components: int, stage: str) -> tuple[np.ndarray, np.ndarray]:
    """The sum of the silos' tables from their masked vectors: (cluster (C,), modality (C, P))."""
    vectors = [np.asarray(r.masked, dtype=np.uint64) for r in replies.values()]
    if not all(isinstance(r, RoundMaskedCountsReply) for r in replies.values()) or len(
            {v.shape for v in vectors}) != 1:
        raise InconsistentSiloSummaries(f"{stage}: under secure aggregation every silo's counts come masked "
                                        "and of one length")
    acc = np.zeros_like(vectors[0])
    for v in vectors:
        acc += v                                   # modulo 2^64 (numpy's unsigned arithmetic wraps)
    summed = acc.view(np.int64)
    if np.any(np.abs(summed.astype(np.float64)) > PLAUSIBLE):
        raise InconsistentSiloSummaries(
            f"{stage}: the silos' masked tables do not sum to counts (their masks did not cancel): a silo "
            "received a different request or a different set of keys than the others")
    return unpack_counts(summed, n_components)
