"""Simulated federated data: the paper's shard designs (Table 1) and a general latent class generator.

The paper's designs (docs/design.md §10): S = 4 silos of 1000 individuals, four binary and six ternary
variables, cluster profiles ``p^q_{.,c}`` drawn independently for every (variable, cluster) from a symmetric
Dirichlet(0.3) ("easy" separability) or Dirichlet(1) ("poor"), redrawn for every dataset, and cluster labels
drawn within each silo with the probabilities of Table 1 (multinomially by default, exact proportions as
an option).

Randomness (docs/design.md §12.3): the root ``rng`` becomes a ``SeedSequence`` that is spawned into
``1 + S`` children: child 0 draws the profiles, child ``s + 1`` draws silo ``s``
(labels, values, missingness).
So changing the size of one silo, or adding a silo, changes neither the profiles nor the other silos.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from vcmc._rng import RngLike, as_seed_sequence, root_entropy
from vcmc.atomic import atomic_path, atomic_write_text
from vcmc.data.schema import Schema, SiloData
from vcmc.exceptions import ConfigError
from vcmc.model import MISSING, profile_offsets

__all__ = ["DESIGNS", "PAPER_N_MODALITIES", "SEPARABILITIES", "SimulatedData", "design_weights", "simulate",
           "simulate_design", "sparse_binary_profiles"]

DESIGNS: tuple[str, ...] = ("homogeneous", "nested", "non-nested")

#: Dirichlet concentration of the profiles for each separability (docs/design.md §10).
SEPARABILITIES: dict[str, float] = {"easy": 0.3, "poor": 1.0}

#: Four binary then six ternary variables (docs/design.md §10).
PAPER_N_MODALITIES: tuple[int, ...] = (2, 2, 2, 2, 3, 3, 3, 3, 3, 3)

_H, _F, _T, _B = 1 / 6, 1 / 5, 1 / 3, 1 / 2
# Table 1 (the paper, docs/design.md §10; the same numbers ship in vcmc/research/study/paper_tables.json).
_TABLE1 = {
    "homogeneous": [[_F] * 5] * 4,
    "nested": [[_H] * 6,
               [_F] * 5 + [0],
               [_T] * 3 + [0] * 3,
               [_B] * 2 + [0] * 4],
    "non-nested": [[_F] * 5 + [0],
                   [0] + [_F] * 5,
                   [_T] * 3 + [0] * 3,
                   [_B] * 2 + [0] * 4],
}


def _canonical_design(design: str, where: str) -> str:
    key = str(design).strip().lower().replace("_", "-")
    key = {"non-nested": "non-nested", "nonnested": "non-nested", "heterogeneous-nested": "nested",
           "heterogeneous-non-nested": "non-nested"}.get(key, key)
    if key not in DESIGNS:
        raise ConfigError(f"The 'design' parameter of {where} must be one of {DESIGNS}. "
                          f"Got {design!r} instead.")
    return key


def design_weights(design: str) -> np.ndarray:
    """Cluster probabilities of each silo in one of the paper's designs (Table 1).

    Parameters
    ----------
    design : {"homogeneous", "nested", "non-nested"}
        Shard design ("non_nested" is accepted as well).

    Returns
    -------
    numpy.ndarray of shape (4, C)
        Row s = probabilities of clusters 1..C in silo s; C = 5 (homogeneous) or 6 (heterogeneous).
    """
    return np.array(_TABLE1[_canonical_design(design, "design_weights")], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class SimulatedData:
    """Simulated silos with the truth that generated them.

    Attributes
    ----------
    silos : tuple of SiloData
        Named ``"silo_1" .. "silo_S"``.
    labels : tuple of numpy.ndarray
        True cluster (0-based) of each row, one array of shape (n_s,) per silo.
    weights : numpy.ndarray of shape (S, C)
        True cluster probabilities of each silo (Table 1 rows for the paper's designs).
    global_weights : numpy.ndarray of shape (C,)
        Pooled probabilities: the n_s-weighted mean of the silo rows (Table 1 "G").
    profiles : numpy.ndarray of shape (C, P)
        True profiles in the flat layout of :mod:`vcmc.model`.
    n_modalities : tuple of int
        K^q of each variable.
    schema : Schema
        Variables ``"V1".."VQ"`` with modalities ``"1".."K^q"``.
    design, separability : str or None
        The paper's scenario, when simulated by :func:`simulate_design`.
    seed : int or None
        Root seed (when the ``rng`` was an int), so the data can be regenerated.
    missing_rate : float
        Probability that a cell is missing (completely at random).
    characterisation : dict or None
        Designed high/low variables per cluster, ``{"cluster_c": {"high": [...], "low": [...]}}`` (the EHR
        design of :mod:`vcmc.research.ehr`); written to ``truth.json`` when set.
    details : dict or None
        Further design facts written at the top level of ``truth.json`` (e.g. condition display names).
    """

    silos: tuple[SiloData, ...]
    labels: tuple[np.ndarray, ...]
    weights: np.ndarray
    global_weights: np.ndarray
    profiles: np.ndarray
    n_modalities: tuple[int, ...]
    schema: Schema
    design: str | None = None
    separability: str | None = None
    seed: int | None = None
    missing_rate: float = field(default=0.0)
    characterisation: dict | None = None
    details: dict | None = None

    @property
    def n_silos(self) -> int:
        """Number of silos S."""
        return len(self.silos)

    @property
    def n_clusters(self) -> int:
        """Number of true clusters C (columns of ``weights``, including clusters absent from every silo)."""
        return int(self.weights.shape[1])

    @property
    def n_per_silo(self) -> tuple[int, ...]:
        """Rows of each silo."""
        return tuple(s.n_rows for s in self.silos)

    @property
    def pooled_codes(self) -> np.ndarray:
        """All silos stacked in silo order, shape (n, Q), int16."""
        return np.concatenate([s.codes for s in self.silos], axis=0)

    @property
    def pooled_labels(self) -> np.ndarray:
        """True labels (0-based) of :attr:`pooled_codes`, shape (n,)."""
        return np.concatenate(self.labels)

    def profile_dict(self) -> dict:
        """Profiles as ``{"cluster_c": {variable: {modality: probability}}}`` (clusters numbered from 1)."""
        off = profile_offsets(self.n_modalities)
        out = {}
        for c in range(self.n_clusters):
            out[f"cluster_{c + 1}"] = {
                var.name: {m: float(self.profiles[c, off[q] + k]) for k, m in enumerate(var.modalities)}
                for q, var in enumerate(self.schema.variables)}
        return out

    def truth_dict(self) -> dict:
        """Everything in ``truth.json``: design, seed, weights per silo and overall, profiles, schema.

        Plus ``characterisation`` and the keys of ``details`` when they are set.
        """
        out = {
            "design": self.design,
            "separability": self.separability,
            "seed": self.seed,
            "missing_rate": self.missing_rate,
            "silos": [s.name for s in self.silos],
            "n_per_silo": list(self.n_per_silo),
            "clusters": list(range(1, self.n_clusters + 1)),
            "weights": {s.name: self.weights[i].tolist() for i, s in enumerate(self.silos)},
            "global_weights": self.global_weights.tolist(),
            "n_modalities": list(self.n_modalities),
            "profiles": self.profile_dict(),
            "profiles_flat": self.profiles.tolist(),
            "schema": self.schema.to_dict(),
        }
        if self.characterisation is not None:
            out["characterisation"] = self.characterisation
        for key, value in (self.details or {}).items():
            if key in out:
                raise ConfigError(f"SimulatedData.details key {key!r} clashes with a truth.json key; "
                                  "expected new keys only.")
            out[key] = value
        return out

    def write(self, out_dir) -> list[Path]:
        """Write the ``vcmc simulate`` files into ``out_dir`` (created if needed).

        ``silo_<s>.csv`` (header of variable names, one row per individual, labels, missing as an empty
        field), ``truth.csv`` (``silo,row,cluster``; ``row`` 0-based within the silo's file, clusters from
        1), ``truth.json`` (:meth:`truth_dict`) and ``schema.json`` (the shared schema).

        Returns
        -------
        list of pathlib.Path
            The files written.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for silo in self.silos:
            path = out / f"{silo.name}.csv"
            _write_codes_csv(path, silo.codes, self.schema)
            written.append(path)
        truth = pd.DataFrame({
            "silo": np.repeat([s.name for s in self.silos], self.n_per_silo),
            "row": np.concatenate([np.arange(s.n_rows) for s in self.silos]),
            "cluster": self.pooled_labels.astype(np.int64) + 1,
        })
        path = out / "truth.csv"
        with atomic_path(path) as tmp:
            truth.to_csv(tmp, index=False)
        written.append(path)
        path = out / "truth.json"
        atomic_write_text(path, json.dumps(self.truth_dict(), indent=1) + "\n")
        written.append(path)
        path = out / "schema.json"
        self.schema.to_json(path)
        written.append(path)
        return written


def _write_codes_csv(path: Path, codes: np.ndarray, schema: Schema, chunk: int = 20_000) -> None:
    """Write codes as labelled CSV, byte for byte what ``schema.decode(codes).to_csv(path, index=False,
    na_rep="")`` writes, about 3x faster.

    pandas' writer runs the same ``csv`` module (minimal quoting, ``os.linesep`` line ends) but first builds
    a decoded object frame (``Schema.decode``), which costs as much as the writing itself; here each
    variable's labels are looked up in a small table (no new string per cell) and rows are handed to
    ``csv.writer`` in chunks, so memory stays bounded for any number of rows.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != schema.n_variables:
        raise ConfigError(f"codes must have shape (n, {schema.n_variables}); got {codes.shape}.")
    if codes.size and (codes.min() < MISSING or np.any(codes.max(axis=0) >= np.array(schema.n_modalities))):
        raise ConfigError("codes must lie in [-1, K^q - 1] for every variable of the schema.")
    # One table per variable: modality labels, then "" for MISSING (-1 indexes the last entry).
    tables = [np.array([*var.modalities, ""], dtype=object) for var in schema.variables]
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator=os.linesep)
        writer.writerow(schema.names)
        block = np.empty((min(chunk, codes.shape[0]), schema.n_variables), dtype=object)
        for start in range(0, codes.shape[0], chunk):
            part = codes[start:start + chunk]
            cells = block[:part.shape[0]]
            for q, table in enumerate(tables):
                cells[:, q] = table[part[:, q]]
            writer.writerows(cells.tolist())


def _exact_counts(n: int, w: np.ndarray) -> np.ndarray:
    """Counts summing to n closest to n*w (largest-remainder rounding; ties to the lower cluster index)."""
    target = n * w
    counts = np.floor(target + 1e-9).astype(np.int64)
    short = n - int(counts.sum())
    if short > 0:
        order = np.argsort(-(target - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def _draw_categorical(u: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one category per row: ``u`` (n,), ``probs`` (n, K) -> codes (n,)."""
    cdf = np.cumsum(probs, axis=1)
    # Clip guards against a cumulative sum that rounds to slightly below 1.
    return np.minimum((u[:, None] >= cdf).sum(axis=1), probs.shape[1] - 1)


def _check_weights(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 1:
        w = w[None, :]
    if w.ndim != 2 or w.shape[0] < 1 or w.shape[1] < 1:
        raise ConfigError(f"The 'weights' parameter of simulate must have shape (S, C); got {w.shape}.")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ConfigError("The 'weights' parameter of simulate must be finite and non-negative. "
                          f"Got {w.tolist()} instead.")
    sums = w.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-8):
        raise ConfigError("Each row of the 'weights' parameter of simulate must sum to 1 (the cluster "
                          f"probabilities of one silo). Got row sums {sums.tolist()} instead.")
    return w / sums[:, None]


def simulate(*, n_per_silo, weights, n_modalities, concentration=1.0, profiles=None, missing_rate=0.0,
             rng: RngLike = None, exact: bool = False, design: str | None = None,
             separability: str | None = None) -> SimulatedData:
    """Simulate silos from a latent class model with silo-specific cluster probabilities.

    Parameters
    ----------
    n_per_silo : int or sequence of int
        Rows per silo (one value for all, or one per silo); each >= 2.
    weights : array_like of shape (S, C)
        Cluster probabilities of each silo; rows sum to 1; zeros allowed (cluster absent from a silo).
    n_modalities : sequence of int
        K^q >= 2 for each variable.
    concentration : float or array_like of shape (Q,)
        Symmetric Dirichlet concentration of the profiles (per variable when an array). Ignored when
        ``profiles`` is given.
    profiles : array_like of shape (C, P), optional
        Fixed true profiles (flat layout; each variable's block sums to 1).
    missing_rate : float in [0, 1)
        Probability that a cell is missing, completely at random, independently over cells.
    rng : int, Generator, SeedSequence or None
        Root of the random streams (see module docstring).
    exact : bool
        If True, each silo holds exactly round(n_s * w_sc) members of cluster c (largest-remainder
        rounding, rows in random order); otherwise labels are i.i.d. draws with the silo's probabilities.
    design, separability : str, optional
        Recorded in the result (set by :func:`simulate_design`).

    Returns
    -------
    SimulatedData
    """
    w = _check_weights(weights)
    n_silos, n_clusters = w.shape
    k = np.asarray(n_modalities, dtype=np.int64).ravel()
    if k.size < 1 or np.any(k < 2):
        raise ConfigError("The 'n_modalities' parameter of simulate must list at least one variable, each "
                          f"with >= 2 modalities. Got {k.tolist()} instead.")
    if np.any(k > np.iinfo(np.int16).max):
        raise ConfigError(f"The 'n_modalities' parameter of simulate must be <= 32767. Got {k.tolist()}.")
    n = np.broadcast_to(np.asarray(n_per_silo), (n_silos,)) if np.ndim(n_per_silo) == 0 else \
        np.asarray(n_per_silo)
    if n.shape != (n_silos,) or not np.issubdtype(n.dtype, np.integer) or np.any(n < 2):
        raise ConfigError(f"The 'n_per_silo' parameter of simulate must be an integer >= 2 or {n_silos} of "
                          f"them (one per row of 'weights'). Got {np.asarray(n_per_silo).tolist()} instead.")
    if not (0.0 <= float(missing_rate) < 1.0):
        raise ConfigError(f"The 'missing_rate' parameter of simulate must be in [0, 1). Got {missing_rate!r} "
                          "instead.")
    offsets = profile_offsets(k)
    q_count = k.size

    root = as_seed_sequence(rng)
    children = root.spawn(1 + n_silos)
    if profiles is None:
        a = np.broadcast_to(np.asarray(concentration, dtype=np.float64), (q_count,))
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ConfigError(f"The 'concentration' parameter of simulate must be > 0. "
                              f"Got {concentration!r}.")
        prng = np.random.default_rng(children[0])
        # One Dirichlet draw per (cluster, variable), independently (docs/design.md §10).
        blocks = [prng.dirichlet(np.full(int(k[q]), a[q]), size=n_clusters) for q in range(q_count)]
        prof = np.concatenate(blocks, axis=1)
    else:
        prof = np.asarray(profiles, dtype=np.float64)
        if prof.shape != (n_clusters, int(offsets[-1])):
            raise ConfigError(f"The 'profiles' parameter of simulate must have shape ({n_clusters}, "
                              f"{int(offsets[-1])}) (clusters x sum of modalities). "
                              f"Got {prof.shape} instead.")
        sums = np.add.reduceat(prof, offsets[:-1], axis=1)
        if np.any(prof < 0) or not np.allclose(sums, 1.0, atol=1e-8):
            raise ConfigError("The 'profiles' parameter of simulate must be non-negative with each "
                              "variable's block summing to 1 in every cluster.")
        prof = prof.copy()

    schema = Schema.from_n_modalities(k.tolist())
    silos, labels = [], []
    for s in range(n_silos):
        g = np.random.default_rng(children[s + 1])
        ns = int(n[s])
        if exact:
            z = g.permutation(np.repeat(np.arange(n_clusters), _exact_counts(ns, w[s])))
        else:
            z = g.choice(n_clusters, size=ns, p=w[s])
        u = g.random((ns, q_count))
        codes = np.empty((ns, q_count), dtype=np.int16)
        for q in range(q_count):  # loop over variables only; rows are vectorised
            codes[:, q] = _draw_categorical(u[:, q], prof[z, offsets[q]:offsets[q + 1]])
        if missing_rate > 0:
            codes[g.random((ns, q_count)) < missing_rate] = MISSING
        silos.append(SiloData(f"silo_{s + 1}", codes, schema, source=f"simulated silo_{s + 1}"))
        labels.append(z.astype(np.int64))

    global_w = (n[:, None] * w).sum(axis=0) / n.sum()
    return SimulatedData(silos=tuple(silos), labels=tuple(labels), weights=w, global_weights=global_w,
                         profiles=prof, n_modalities=tuple(int(x) for x in k), schema=schema, design=design,
                         separability=separability, seed=root_entropy(rng), missing_rate=float(missing_rate))


def sparse_binary_profiles(n_clusters: int, n_conditions: int, *, rng: RngLike = None,
                           prevalence: tuple[float, float] = (0.01, 0.30), n_high: tuple[int, int] = (2, 5),
                           high: tuple[float, float] = (0.35, 0.70), n_low: tuple[int, int] = (0, 2),
                           low_factor: float = 5.0) -> np.ndarray:
    """Profiles of binary conditions as in health records: rare everywhere, characteristic in some clusters.

    Every condition has a baseline prevalence drawn log-uniformly in ``prevalence``; cluster 1 keeps the
    baseline everywhere (a large "no specific condition" class); every other cluster raises between
    ``n_high[0]`` and ``n_high[1]`` conditions (chosen at random) to a prevalence uniform in ``high`` and
    divides between ``n_low[0]`` and ``n_low[1]`` others by ``low_factor``.

    Parameters
    ----------
    n_clusters, n_conditions : int
    rng : int, Generator, SeedSequence or None
    prevalence, n_high, high, n_low, low_factor
        See above; weaker ``high`` values give poorer separability.

    Returns
    -------
    ndarray of shape (n_clusters, 2 * n_conditions)
        Flat profiles, modalities ordered (absent, present) for every condition.
    """
    if n_clusters < 1 or n_conditions < 1:
        raise ConfigError(f"sparse_binary_profiles needs n_clusters >= 1 and n_conditions >= 1; got "
                          f"{n_clusters} and {n_conditions}.")
    if not (0 < prevalence[0] <= prevalence[1] < 1 and 0 < high[0] <= high[1] < 1 and low_factor >= 1):
        raise ConfigError("sparse_binary_profiles needs 0 < prevalence[0] <= prevalence[1] < 1, "
                          "0 < high[0] <= high[1] < 1 and low_factor >= 1.")
    if n_high[1] + n_low[1] > n_conditions:
        raise ConfigError(f"sparse_binary_profiles: {n_high[1]} raised + {n_low[1]} lowered conditions do not "
                          f"fit in {n_conditions} conditions.")
    gen = np.random.default_rng(as_seed_sequence(rng))
    base = np.exp(gen.uniform(np.log(prevalence[0]), np.log(prevalence[1]), n_conditions))
    prev = np.tile(base, (n_clusters, 1))
    for c in range(1, n_clusters):
        k_hi = int(gen.integers(n_high[0], n_high[1] + 1))
        k_lo = int(gen.integers(n_low[0], n_low[1] + 1))
        idx = gen.choice(n_conditions, k_hi + k_lo, replace=False)
        prev[c, idx[:k_hi]] = gen.uniform(high[0], high[1], k_hi)
        prev[c, idx[k_hi:]] = base[idx[k_hi:]] / low_factor
    flat = np.empty((n_clusters, 2 * n_conditions))
    flat[:, 0::2] = 1.0 - prev
    flat[:, 1::2] = prev
    return flat


def simulate_design(design: str, separability: str, *, rng: RngLike = None, n_per_silo=1000,
                    exact: bool = False, missing_rate: float = 0.0) -> SimulatedData:
    """Simulate one dataset of the paper's scenarios (docs/design.md §10).

    Parameters
    ----------
    design : {"homogeneous", "nested", "non-nested"}
        Shard design of Table 1.
    separability : {"easy", "poor"}
        Profiles drawn from symmetric Dirichlet(0.3) (easy) or Dirichlet(1) (poor).
    rng : int, Generator, SeedSequence or None
        Root seed.
    n_per_silo : int or sequence of 4 int
        Rows per silo (1000 in the paper).
    exact : bool
        Exact cluster proportions instead of multinomial labels.
    missing_rate : float
        Probability that a cell is missing completely at random (0 in the paper).

    Returns
    -------
    SimulatedData
        4 silos, 4 binary + 6 ternary variables, C = 5 (homogeneous) or 6 true clusters.
    """
    key = _canonical_design(design, "simulate_design")
    sep = str(separability).strip().lower()
    if sep not in SEPARABILITIES:
        raise ConfigError(f"The 'separability' parameter of simulate_design must be one of "
                          f"{tuple(SEPARABILITIES)}. Got {separability!r} instead.")
    return simulate(n_per_silo=n_per_silo, weights=design_weights(key), n_modalities=PAPER_N_MODALITIES,
                    concentration=SEPARABILITIES[sep], missing_rate=missing_rate, rng=rng, exact=exact,
                    design=key, separability=sep)
