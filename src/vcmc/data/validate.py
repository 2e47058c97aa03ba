"""Checks a silo's data must pass before anything is computed on it (docs/design.md §12.2).

These checks run on the silo's own machine, so their messages may name values of the operator's own data.
They raise :class:`~vcmc.exceptions.DataError` / :class:`~vcmc.exceptions.SchemaError`, never repair: nothing
is silently dropped or recoded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vcmc.data.schema import Schema, SiloData, format_values
from vcmc.exceptions import DataError, SchemaError
from vcmc.model import MISSING

__all__ = ["MIN_ROWS", "check_columns_observed", "check_n_rows", "check_same_schema", "validate_silo"]

#: A silo needs at least two individuals: with one, a clustering (and any within-silo variance) is undefined.
MIN_ROWS = 2


def check_n_rows(n_rows: int, source: str) -> None:
    """Raise :class:`DataError` if a silo has fewer than :data:`MIN_ROWS` rows."""
    if n_rows < MIN_ROWS:
        raise DataError(f"{source}: has {n_rows} data row(s) (n_samples = {n_rows}); expected at least "
                        f"{MIN_ROWS} individuals (one row each) after the header.")


def check_columns_observed(codes: np.ndarray, schema: Schema, source: str) -> None:
    """Raise :class:`DataError` if some column is missing in every row of the silo."""
    codes = np.asarray(codes)
    if codes.shape[0] == 0:
        return
    empty = np.flatnonzero(np.all(codes == MISSING, axis=0))
    if empty.size:
        names = [schema.names[q] for q in empty]
        raise DataError(f"{source}: column(s) {format_values(names)} have all {codes.shape[0]} values missing; "
                        "expected at least one observed value per column. Remove the column from every "
                        "silo's file and from the schema, or fix the export.")


def validate_silo(silo: SiloData) -> SiloData:
    """Run the per-silo checks (rows, fully missing columns); return the silo unchanged."""
    where = silo.source or f"silo {silo.name!r}"
    check_n_rows(silo.n_rows, where)
    check_columns_observed(silo.codes, silo.schema, where)
    return silo


def _schema_difference(a: Schema, b: Schema) -> str:
    if a.names != b.names:
        only_a = [n for n in a.names if n not in b.names]
        only_b = [n for n in b.names if n not in a.names]
        if only_a or only_b:
            return (f"variables only in the first: {format_values(only_a)}; only in the second: "
                    f"{format_values(only_b)}")
        return f"variables in a different order: {format_values(a.names, 20)} vs {format_values(b.names, 20)}"
    for va, vb in zip(a.variables, b.variables, strict=True):
        if va.modalities != vb.modalities:
            return (f"column {va.name!r} has modalities {format_values(va.modalities, 20)} in the first and "
                    f"{format_values(vb.modalities, 20)} in the second")
    return "fingerprints differ"


def check_same_schema(silos: Sequence[SiloData]) -> Schema:
    """Check that every silo uses the same schema; return it.

    Raises
    ------
    SchemaError
        Naming the two silos and the first difference (a variable missing, another order, other modalities).
        Fix: infer one schema from all silos (:func:`vcmc.data.infer_schema`) or share one JSON file.
    """
    silos = list(silos)
    if not silos:
        raise DataError("expected at least one silo; got none.")
    ref = silos[0]
    fp = ref.schema.fingerprint()
    for s in silos[1:]:
        if s.schema.fingerprint() != fp:
            raise SchemaError(
                f"silos {ref.name!r} ({ref.source or 'no file'}) and {s.name!r} ({s.source or 'no file'}) "
                f"use different schemas ({_schema_difference(ref.schema, s.schema)}); "
                "expected one shared schema. "
                "Infer it from all silos together or pass the same schema JSON to every silo.")
    names = [s.name for s in silos]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise DataError(f"silo names must be distinct; got {format_values(dup)} more than once.")
    return ref.schema
