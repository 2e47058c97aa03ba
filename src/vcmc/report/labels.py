"""User names of clusters (``vcmc report --labels FILE``): a CSV ``cluster,label`` or a JSON mapping.

The names replace nothing: every table and figure shows the cluster number beside its name, so a
report can always be joined back to ``assignments.csv`` and ``profiles.csv``.
"""

from __future__ import annotations

import json
from pathlib import Path

from vcmc.exceptions import DataError


def _as_cluster(value, where: str) -> int:
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise DataError(f"{where}: cluster {text!r} is not a cluster number (expected a whole number "
                        "from 1, as in result.json)") from None
    return number


def _pairs_from_csv(path: Path) -> list[tuple[int, str, str]]:
    import csv

    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
        if not {"cluster", "label"} <= set(header):
            raise DataError(f"{path}: expected a header row 'cluster,label'; found "
                            f"{','.join(reader.fieldnames or []) or 'no header'}")
        reader.fieldnames = header
        out = []
        for line, row in enumerate(reader, start=2):
            where = f"{path}, line {line}"
            out.append((_as_cluster(row.get("cluster"), where), (row.get("label") or "").strip(), where))
    return out


def _pairs_from_json(path: Path) -> list[tuple[int, str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object mapping cluster numbers to names, e.g. "
                        '{"1": "Low multimorbidity", "2": "Cardiac"}')
    out = []
    for key, value in data.items():
        where = f"{path}, key {key!r}"
        if not isinstance(value, str):
            raise DataError(f"{where}: expected a name (a string); got {type(value).__name__}")
        out.append((_as_cluster(key, where), value.strip(), where))
    return out


def read_labels(path, cluster_ids, *, required=None) -> dict[int, str]:
    """Cluster names from ``path``, checked against the fit.

    Parameters
    ----------
    path : path-like
        ``.json``: an object ``{"1": "name", ...}``; anything else is read as CSV with header
        ``cluster,label``.
    cluster_ids : iterable of int
        The fit's cluster numbers (result.json): a name for any other number is an error.
    required : iterable of int, optional
        Clusters that must be named (default: all of ``cluster_ids``); the report asks for the clusters
        holding rows, so an empty over-fitted cluster may stay unnamed.

    Raises
    ------
    DataError
        Naming the file and the offending cluster numbers or names: an unknown cluster number, a cluster
        named twice, two clusters with one name, an empty name, or a required cluster without a name.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"--labels {path}: not found; expected a CSV 'cluster,label' or a JSON mapping")
    pairs = _pairs_from_json(path) if path.suffix.lower() == ".json" else _pairs_from_csv(path)
    known = {int(c) for c in cluster_ids}
    need = known if required is None else {int(c) for c in required}
    labels: dict[int, str] = {}
    for cluster, label, where in pairs:
        if not label:
            raise DataError(f"{where}: cluster {cluster} has an empty name")
        if cluster not in known:
            raise DataError(f"{path}: cluster {cluster} is not a cluster of this fit (its clusters are "
                            f"{_ranges(sorted(known))})")
        if cluster in labels:
            raise DataError(f"{path}: cluster {cluster} is named twice ({labels[cluster]!r} and {label!r})")
        labels[cluster] = label
    by_name: dict[str, list[int]] = {}
    for cluster, label in labels.items():
        by_name.setdefault(label.casefold(), []).append(cluster)
    twice = {k: v for k, v in by_name.items() if len(v) > 1}
    if twice:
        name, clusters = next(iter(twice.items()))
        raise DataError(f"{path}: clusters {', '.join(map(str, sorted(clusters)))} have the same name "
                        f"{labels[clusters[0]]!r}; every cluster needs its own name")
    missing = sorted(need - set(labels))
    if missing:
        raise DataError(f"{path}: no name for cluster(s) {_ranges(missing)}; expected a name for every cluster "
                        f"holding rows ({_ranges(sorted(need))})")
    return labels


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(parts)
