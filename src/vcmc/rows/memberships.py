"""Memberships of a silo's rows in the global clusters, computed inside the silo (they are row-level).

A row's membership of cluster ``c`` is its allocation probability under the model,
``pi_c prod_q p^q_{x_q, c} / sum_c' (...)``, averaged over posterior draws of the parameters (not taken at a
point estimate, which is overconfident for rows between two clusters). Missing values are skipped. The
fit's labelling averages as many draws as a Monte Carlo target needs (``memberships_to_target``); the
work per row grows with the cells that differ from the silo's most frequent code (the sampler's sparse
layout, compiled kernels in ``vcmc.rows.row_kernels``). The same functions serve the fit (the global
draws sent by the server), the local posterior (its own draws) and predictions for new rows under a saved
fit.

``write_membership_files`` writes them in the one format every caller uses (``vcmc fit``, ``vcmc predict``,
a Flower ClientApp on its silo's host): ``memberships.csv`` (``silo,row,p_1,...,p_K``) and
``assignments.csv`` (``silo,row,cluster,probability``), clusters numbered from 1, rows 0-based.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vcmc.atomic import atomic_path
from vcmc.data.codes import check_codes, check_modalities
from vcmc.mcmc.sampler.layout import sparse_layout
from vcmc.model import profile_offsets
from vcmc.rows.row_kernels import DrawTables, accumulate_memberships

__all__ = ["MC_ERROR_TARGET", "MonteCarlo", "membership_summary", "memberships_to_target",
           "posterior_memberships", "write_membership_files"]


# Default Monte Carlo target of labelling: the largest standard error, over rows and clusters, of a
# membership probability left by averaging a finite number of draws. A probability's draws lie in [0, 1], so
# their standard deviation is at most 1/2 and 100 draws (the draws the server sends by default,
# ``AggregationConfig.assign_draws``) always reach 0.05; rows every draw agrees on reach it with the first batch.
MC_ERROR_TARGET = 0.05

# Draws of the first batch; each further batch doubles the draws used (docs/design.md §8).
FIRST_DRAWS = 20


@dataclass(frozen=True)
class MonteCarlo:
    """How many draws the memberships average and the Monte Carlo error they leave.

    ``error`` is the largest, over rows and clusters, of ``sd_t(w_ict) / sqrt(T)`` (the standard error of the
    average of T draws treated as independent: they are evenly spaced over the thinned global chains);
    ``target`` the error asked for; ``n_draws`` of ``n_available``.
    """

    n_draws: int
    n_available: int
    error: float
    target: float


def _as_draws(pi_draws, profile_draws) -> tuple[np.ndarray, np.ndarray]:
    pi = np.atleast_2d(np.asarray(pi_draws, dtype=np.float64))
    prof = np.asarray(profile_draws, dtype=np.float64)
    if prof.ndim == 2:
        prof = prof[None]
    if pi.shape[0] != prof.shape[0] or pi.shape[1] != prof.shape[1]:
        raise ValueError(f"pi draws {pi.shape} and profile draws {prof.shape} must share (T, C)")
    return pi, np.ascontiguousarray(prof)


def spread_order(n: int) -> np.ndarray:
    """The indices ``0..n-1`` in bit-reversed (van der Corput) order: every prefix is spread evenly over the
    range, so the first T draws used come from the whole length of the chains, not from their start."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    bits = int(np.ceil(np.log2(n)))
    idx = np.arange(1 << bits, dtype=np.int64)
    rev = np.zeros_like(idx)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev[rev < n]


def row_layout(codes: np.ndarray, n_modalities):
    """The sampler's sparse layout of ``codes`` (validated; identical rows grouped) and the flat offsets."""
    k = check_modalities(n_modalities)
    x16 = check_codes(codes, k, dtype=np.int16, min_rows=0)
    offsets = profile_offsets(tuple(int(v) for v in k))
    return sparse_layout(x16, offsets.astype(np.int64)), offsets


def memberships_to_target(codes: np.ndarray, n_modalities, pi_draws: np.ndarray, profile_draws: np.ndarray,
                          *, target: float | None = MC_ERROR_TARGET, first: int = FIRST_DRAWS
                          ) -> tuple[np.ndarray, MonteCarlo]:
    """Allocation probabilities of every row averaged over as many of the draws as the Monte Carlo target
    needs (docs/design.md §8).

    The draws are taken in :func:`spread_order`, ``first`` of them, then twice as many, and so on, until
    the largest standard error of a membership probability (:class:`MonteCarlo`) is at most ``target`` or
    every draw is used (``target=None``: all of them, the exact average).

    Parameters
    ----------
    codes : ndarray of shape (n, Q), int
        ``-1`` = missing.
    n_modalities : sequence of int
    pi_draws : ndarray of shape (T, C) or (C,)
        Weights; a cluster with weight 0 (absent where the rows come from) gets membership 0.
    profile_draws : ndarray of shape (T, C, P) or (C, P)

    Returns
    -------
    memberships : ndarray of shape (n, C)
        Rows sum to 1.
    monte_carlo : MonteCarlo
    """
    pi, prof = _as_draws(pi_draws, profile_draws)
    n_draws, n_comp = pi.shape
    codes = np.asarray(codes)
    lay, _ = row_layout(codes, n_modalities)
    n_pat = lay.n_patterns
    tables = DrawTables(lay.n_slots, n_pat, n_comp)
    mean = np.zeros((n_pat, n_comp))
    m2 = np.zeros((n_pat, n_comp))
    order = spread_order(n_draws)
    stop = n_draws if target is None else min(n_draws, max(int(first), 1))
    used, error = 0, float("nan")
    while True:
        for t in order[used:stop]:
            tables.fill(pi[t], prof[t], lay)
            used += 1
            accumulate_memberships(tables.w, used, mean, m2)
        error = float(np.sqrt(np.nanmax(m2) / (used - 1) / used)) if used > 1 and n_pat else float("nan")
        if used == n_draws or (target is not None and error <= target):
            break
        stop = min(n_draws, 2 * used)
    out = np.empty((codes.shape[0], n_comp))
    out[lay.row_of] = np.repeat(mean, np.diff(lay.pat_start), axis=0)
    return out, MonteCarlo(n_draws=used, n_available=n_draws, error=error,
                           target=float("nan") if target is None else float(target))


def posterior_memberships(codes: np.ndarray, n_modalities, pi_draws: np.ndarray,
                          profile_draws: np.ndarray) -> np.ndarray:
    """Allocation probabilities of every row averaged over all the draws (rows sum to 1; shapes as
    :func:`memberships_to_target`, which the fit's labelling uses with a Monte Carlo target)."""
    return memberships_to_target(codes, n_modalities, pi_draws, profile_draws, target=None)[0]


def membership_summary(memberships: np.ndarray, labels: np.ndarray, monte_carlo: MonteCarlo | None = None
                       ) -> dict:
    """Cluster-level sums of the memberships (what leaves the silo): see ``AssignReply``; with
    ``monte_carlo`` also the number of draws averaged and the Monte Carlo error left (two numbers)."""
    m = np.asarray(memberships, dtype=np.float64)
    c = m.shape[1]
    labels = np.asarray(labels, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.sum(np.where(m > 0, m * np.log(m), 0.0))
    return {"counts": np.bincount(labels, minlength=c).astype(np.int64),
            "expected": m.sum(axis=0),
            "probability": np.bincount(labels, weights=m[np.arange(m.shape[0]), labels], minlength=c),
            "entropy": float(ent),
            **({} if monte_carlo is None else {"n_draws": int(monte_carlo.n_draws),
                                               "mc_error": float(monte_carlo.error),
                                               "mc_target": float(monte_carlo.target)})}


def _check_labels(name: str, memberships: np.ndarray, labels: np.ndarray) -> None:
    """Each label must be a most probable cluster of its row, so the two files agree."""
    if memberships.shape[0] != labels.shape[0]:
        raise ValueError(f"silo {name!r}: {labels.shape[0]} labels for {memberships.shape[0]} membership rows")
    rows = np.arange(labels.shape[0])
    if labels.size and np.any(memberships[rows, labels] < memberships.max(axis=1)):
        raise ValueError(f"silo {name!r}: some labels are not the most probable cluster of their row")


def write_membership_files(out_dir, silos: Sequence[tuple[str, np.ndarray | None, np.ndarray]], *,
                           n_clusters: int | None = None, rows: dict | None = None,
                           stack: contextlib.ExitStack | None = None) -> dict[str, Path]:
    """Write ``memberships.csv`` and ``assignments.csv`` for ``(name, memberships, labels)`` of each silo.

    ``memberships.csv`` has the columns ``silo,row,p_1,...,p_K`` (each row sums to 1; K global clusters);
    ``assignments.csv`` ``silo,row,cluster,probability``, the cluster (from 1) being the row's label and
    ``probability`` its membership of it. Floats are written at full precision (shortest round trip), so
    a reader finds exactly the file's maximum in each row's label. A silo given without memberships (a
    method that has none) gets no ``probability`` and no ``memberships.csv`` rows; with no memberships at
    all ``memberships.csv`` is not written. ``rows`` maps a silo's name to the row number, in its input
    file, of each of its rows (``--silo-column``: rows of the whole file); otherwise rows are 0, 1, ...
    Every file is written atomically; with ``stack`` the renames wait until that exit stack closes (so a
    caller writing several files makes them all or nothing).
    """
    import pandas as pd

    out = Path(out_dir)
    rows = rows or {}
    paths: dict[str, Path] = {}
    assign_frames, member_frames = [], []
    for name, memberships, labels in silos:
        labels = np.asarray(labels, dtype=np.int64)
        numbers = rows.get(name)
        numbers = np.arange(labels.shape[0]) if numbers is None else np.asarray(numbers)
        if numbers.shape != labels.shape:
            raise ValueError(f"silo {name!r}: {numbers.shape[0]} row numbers for {labels.shape[0]} rows")
        frame = pd.DataFrame({"silo": name, "row": numbers, "cluster": labels + 1})
        if memberships is not None:
            m = np.asarray(memberships, dtype=np.float64)
            _check_labels(name, m, labels)
            k = m.shape[1] if n_clusters is None else int(n_clusters)
            if m.shape[1] != k:
                raise ValueError(f"silo {name!r}: memberships of {m.shape[1]} clusters, expected {k}")
            frame["probability"] = m[np.arange(labels.shape[0]), labels]
            member = pd.DataFrame(m, columns=[f"p_{c + 1}" for c in range(k)])
            member.insert(0, "row", numbers)
            member.insert(0, "silo", name)
            member_frames.append(member)
        assign_frames.append(frame)
    with contextlib.ExitStack() as own:
        deferred = own if stack is None else stack
        if assign_frames:
            paths["assignments"] = out / "assignments.csv"
            tmp = deferred.enter_context(atomic_path(paths["assignments"]))
            pd.concat(assign_frames, ignore_index=True).to_csv(tmp, index=False)
        if member_frames:
            paths["memberships"] = out / "memberships.csv"
            tmp = deferred.enter_context(atomic_path(paths["memberships"]))
            pd.concat(member_frames, ignore_index=True).to_csv(tmp, index=False)
    return paths
