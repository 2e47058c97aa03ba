"""The release rules every count shares, whatever the request: the minimum cluster size, DP noise,
suppression and rounding (docs/federation.md, "Disclosure table"). Each endpoint's release rule is made of
these; the limits in force are the gate's (``Gate.privacy``, ``Gate.min_size``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from vcmc.disclosure import protect_counts, round_counts


def small(values: np.ndarray, minimum: int) -> np.ndarray:
    """Entries describing fewer than ``minimum`` people but more than none: withheld (sent as 0)."""
    v = np.asarray(values, dtype=np.float64)
    return (v > 0) & (v < minimum)


def withhold(values: np.ndarray, minimum: int) -> np.ndarray:
    """``values`` with the entries under the minimum size (but above 0) set to 0, dtype kept."""
    v = np.asarray(values)
    return np.where(small(v, minimum), np.zeros((), dtype=v.dtype), v)


def round_real(values: np.ndarray, base: int) -> np.ndarray:
    """Real-valued counts (soft sums) to the nearest multiple of ``base``, halves up, as ``round_counts``."""
    v = np.asarray(values, dtype=np.float64)
    return v if base <= 1 else np.floor(v / base + 0.5) * base


def protect_vector(gate, counts: np.ndarray) -> np.ndarray:
    """Suppression (cells in [1, below) to 0) and rounding of a vector of whole-silo counts."""
    privacy = gate.privacy
    out = np.asarray(counts, dtype=np.int64).copy()
    if privacy.suppress_cells_below > 1:
        out[(out >= 1) & (out < privacy.suppress_cells_below)] = 0
    return round_counts(out, privacy.round_to)


def noised_vector(gate, counts: np.ndarray) -> np.ndarray:
    """A vector of counts with the DP noise in force (none without ``dp_epsilon``), floored at 0."""
    privacy = gate.privacy
    counts = np.asarray(counts, dtype=np.int64)
    if privacy.dp_epsilon is None:
        return counts
    plain = dataclasses.replace(privacy, suppress_cells_below=0, round_to=1)
    return np.maximum(protect_counts(counts[None], plain, gate.noise_rng(), secure=gate.silo.secure_noise)[0][0], 0)


def protect_table(gate, cluster: np.ndarray, modality: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A count table (cluster sizes ``(..., C)`` and their modality counts ``(..., C, P)``) as it may leave the
    silo: clusters under the minimum size withheld with their modality counts, DP noise, suppression and
    rounding of the cells, and a cluster that rounding took under the minimum withheld after it."""
    privacy = gate.privacy
    cluster = np.asarray(cluster, dtype=np.float64)
    modality = np.asarray(modality, dtype=np.float64)
    too_small = small(cluster, gate.min_size)                    # (C,) or (M, C): clusters too small to send
    cluster = np.where(too_small, 0.0, cluster)
    modality = np.where(too_small[..., None], 0.0, modality)
    if privacy.dp_epsilon is not None:
        rng = gate.noise_rng()
        shape = modality.shape
        flat = modality.reshape(-1, shape[-1])
        noisy, _ = protect_counts(np.rint(flat), dataclasses.replace(privacy, suppress_cells_below=0, round_to=1),
                                  rng, n_modalities=gate.silo.n_modalities, secure=gate.silo.secure_noise)
        modality = noisy.reshape(shape).astype(np.float64)
    if privacy.suppress_cells_below > 1:
        modality = np.where((modality > 0) & (modality < privacy.suppress_cells_below), 0.0, modality)
    cluster = withhold(round_real(cluster, privacy.round_to), gate.min_size)
    # rounding can take a cluster under the minimum: its modality counts go with it
    modality = np.where((cluster == 0)[..., None], 0.0, round_real(modality, privacy.round_to))
    return cluster, modality


def unprotected(gate) -> bool:
    """No suppression, rounding or noise in force."""
    privacy = gate.privacy
    return privacy.suppress_cells_below <= 1 and privacy.round_to <= 1 and privacy.dp_epsilon is None
