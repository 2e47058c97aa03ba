"""Memberships of a silo's rows in the global clusters, computed inside the silo (they are row-level).

A row's membership of cluster ``c`` is its allocation probability under the model,
``pi_c prod_q p^q_{x_q, c} / sum_c' (...)``, averaged over posterior draws of the parameters (not taken at a
point estimate, which is overconfident for rows between two clusters). Missing values are skipped. The
same function serves the fit (the global draws sent by the server), the local posterior (its own draws) and
predictions for new rows under a saved fit.

``write_membership_files`` writes them in the one format every caller uses (``vcmc fit``, ``vcmc predict``,
a Flower ClientApp on its silo's host): ``memberships.csv`` (``silo,row,p_1,...,p_K``) and
``assignments.csv`` (``silo,row,cluster,probability``), clusters numbered from 1, rows 0-based.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from vcmc.atomic import atomic_path
from vcmc.model import log_likelihood_rows

__all__ = ["membership_summary", "posterior_memberships", "write_membership_files"]


def posterior_memberships(codes: np.ndarray, n_modalities, pi_draws: np.ndarray,
                          profile_draws: np.ndarray) -> np.ndarray:
    """Allocation probabilities of every row averaged over the draws.

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
    ndarray of shape (n, C)
        Rows sum to 1.
    """
    pi = np.atleast_2d(np.asarray(pi_draws, dtype=np.float64))
    prof = np.asarray(profile_draws, dtype=np.float64)
    if prof.ndim == 2:
        prof = prof[None]
    if pi.shape[0] != prof.shape[0] or pi.shape[1] != prof.shape[1]:
        raise ValueError(f"pi draws {pi.shape} and profile draws {prof.shape} must share (T, C)")
    codes = np.asarray(codes)
    out = np.zeros((codes.shape[0], pi.shape[1]))
    for t in range(pi.shape[0]):          # a loop over draws only: each step is vectorised over rows
        with np.errstate(divide="ignore"):
            ll = log_likelihood_rows(codes, pi[t], prof[t], n_modalities)
        out += np.exp(ll - logsumexp(ll, axis=1, keepdims=True))
    return out / pi.shape[0]


def membership_summary(memberships: np.ndarray, labels: np.ndarray) -> dict:
    """Cluster-level sums of the memberships (what leaves the silo): see ``AssignReply``."""
    m = np.asarray(memberships, dtype=np.float64)
    c = m.shape[1]
    labels = np.asarray(labels, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.sum(np.where(m > 0, m * np.log(m), 0.0))
    return {"counts": np.bincount(labels, minlength=c).astype(np.int64),
            "expected": m.sum(axis=0),
            "probability": np.bincount(labels, weights=m[np.arange(m.shape[0]), labels], minlength=c),
            "entropy": float(ent)}


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
