"""What the encoded silos show that may be a mistake but can be a fact: warnings, named with their values.

Schema inference refuses what it would have to guess (``vcmc.data.readers``); these are the cases where the
data can be right as it is, so the run goes on and the user is told, with the option or fix, before any
sampling:

* a modality spelled like a missing-value code (``"."``, ``"?"``, ``"None"``, ``"missing"``, ``-9``...;
  ``vcmc.data.normalise.MISSING_CODES``);
* a variable whose modalities are disjoint across silos (``Y``/``N`` in some silos, ``yes``/``no`` in
  others): one code spelled two ways gives twice the modalities and clusters split by silo;
* two silos holding identical data (the same file given under two names counts every person twice).

Only modality labels (schema-level facts) and counts are named, never a row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from vcmc.data.normalise import MISSING_CODES
from vcmc.data.schema import SiloData, format_values

__all__ = ["data_warnings", "disjoint_modalities", "duplicate_silos", "missing_codes"]


def _observed(silo: SiloData, q: int) -> frozenset[int]:
    col = silo.codes[:, q]
    return frozenset(np.unique(col[col >= 0]).tolist())


def missing_codes(silos: Sequence[SiloData]) -> list[str]:
    """Modalities spelled like a missing-value code, with their number of rows in all silos."""
    schema = silos[0].schema
    out = []
    for q, var in enumerate(schema.variables):
        for k, label in enumerate(var.modalities):
            if label.strip() in MISSING_CODES:
                n = sum(int(np.count_nonzero(s.codes[:, q] == k)) for s in silos)
                out.append(f"column {var.name!r}: the value {label!r} ({n} rows) is a common code for a missing "
                           f"value; it is clustered as a category. If it means 'missing', say so: --na-values "
                           f"{label.strip()} (recorded in result.json)")
    return out


def disjoint_modalities(silos: Sequence[SiloData]) -> list[str]:
    """Variables whose silos fall into groups observing no modality in common (``Y/N`` against ``yes/no``)."""
    schema = silos[0].schema
    out = []
    for q, var in enumerate(schema.variables):
        # groups of silos linked by a shared modality (connected components; a handful of silos: by hand)
        groups: list[tuple[set[str], set[int]]] = []
        for s in silos:
            seen = set(_observed(s, q))
            if not seen:
                continue
            linked = [g for g in groups if g[1] & seen]
            names, codes = {s.name}, seen
            for g in linked:
                names |= g[0]
                codes |= g[1]
                groups.remove(g)
            groups.append((names, codes))
        if len(groups) > 1 and any(len(codes) > 1 for _, codes in groups):
            parts = [f"silo(s) {format_values(sorted(names))} use "
                     f"{format_values([var.modalities[k] for k in sorted(codes)])}"
                     for names, codes in sorted(groups, key=lambda g: sorted(g[0]))]
            out.append(f"column {var.name!r}: the silos share no value: " + "; ".join(parts) + ". If these are one "
                       "code spelled differently, recode the files to one spelling (or the clusters split by "
                       "silo)")
    return out


def duplicate_silos(silos: Sequence[SiloData]) -> list[str]:
    """Silos whose encoded data are identical (the same file under two names)."""
    seen: dict[str, str] = {}
    out = []
    for s in silos:
        if s.n_rows < 2:
            continue
        digest = hashlib.sha256(str(s.codes.shape).encode() + s.codes.tobytes()).hexdigest()
        if digest in seen:
            out.append(f"silos {seen[digest]!r} and {s.name!r} hold identical data ({s.n_rows} rows, the same "
                       "values in the same order): the same file given twice? Every person would count twice")
        else:
            seen[digest] = s.name
    return out


def data_warnings(silos: Sequence[SiloData]) -> list[str]:
    """Every warning of this module, in a stable order."""
    return [*missing_codes(silos), *disjoint_modalities(silos), *duplicate_silos(silos)]
