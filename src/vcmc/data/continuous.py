"""Continuous columns: reading numbers, proposing a column as continuous, and its scale in the schema.

A continuous column enters the model as a Gaussian item (``vcmc.family.gaussian``, docs/design.md §17.2).
Its cells are numbers in the file's own units; a missing cell (empty, or one of the ``na_values``) is ``NaN``.
Text in a numeric column, an infinity and a constant column are errors naming the file and the column (row
numbers are given, values are not quoted: a measurement is a value of a person). The schema keeps each
column's location and scale, the pooled mean and standard deviation rounded to two significant digits: the
model works on ``(x - location) / scale`` so that its default prior is the same for every unit, and the report
gives every estimate back on the original scale. Rounded, they are round numbers of the units, not statistics
of anyone's rows, and an operator may write their own in the schema file.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from vcmc.exceptions import DataError, SchemaError

if TYPE_CHECKING:
    import pandas as pd

#: A numeric column with more distinct values than this is proposed as continuous by ``vcmc schema``.
CONTINUOUS_LEVELS = 10


def _missing(series: pd.Series, na_values) -> np.ndarray:
    text = series.astype(str).str.strip()
    na = {str(v).strip() for v in (na_values or ())} | {""}
    return (series.isna() | text.isin(na)).to_numpy()


def numeric_column(series: pd.Series, na_values, *, source: str, name: str) -> np.ndarray:
    """The cells of one continuous column as float64, ``NaN`` where missing (module docstring for the errors)."""
    import pandas as pd

    missing = _missing(series, na_values)
    out = np.full(len(series), np.nan)
    kept = series[~missing]
    numbers = pd.to_numeric(kept.astype(str).str.strip() if kept.dtype == object else kept, errors="coerce")
    numbers = np.asarray(numbers, dtype=np.float64)
    text = np.isnan(numbers)
    if text.any():
        rows = np.flatnonzero(~missing)[text]
        raise DataError(f"{source}, column {name!r} is continuous but {rows.size} cell(s) are not numbers (data "
                        f"row(s) {_rows(rows)}, 0-based; values not quoted). Write numbers (a decimal point, no "
                        "units in the cell), mark missing cells as empty or with --na-values, or declare the "
                        "column categorical in the schema.")
    if np.isinf(numbers).any():
        rows = np.flatnonzero(~missing)[np.isinf(numbers)]
        raise DataError(f"{source}, column {name!r}: {rows.size} infinite value(s) (data row(s) {_rows(rows)}, "
                        "0-based); a measurement must be a finite number or missing.")
    out[~missing] = numbers
    return out


def _rows(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:5])
    return shown + (f", ... ({rows.size} in all)" if rows.size > 5 else "")


def looks_continuous(series: pd.Series, na_values) -> bool:
    """Every observed cell a finite number, more than ``CONTINUOUS_LEVELS`` distinct numbers, and not whole
    numbers all distinct (a row identifier, which schema inference refuses as such)."""
    import pandas as pd

    kept = series[~_missing(series, na_values)]
    numbers = pd.to_numeric(kept, errors="coerce")
    if not len(kept) or numbers.isna().any() or not np.isfinite(numbers).all():
        return False
    distinct = numbers.nunique()
    identifier = distinct == len(numbers) and bool((numbers == np.round(numbers)).all())
    return distinct > CONTINUOUS_LEVELS and not identifier


def round_significant(x: float, digits: int = 2) -> float:
    """``x`` rounded to ``digits`` significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(round(x, digits - 1 - int(math.floor(math.log10(abs(x))))))


def location_and_scale(columns: list[tuple[np.ndarray, str]], name: str) -> tuple[float, float]:
    """Pooled mean and standard deviation of one continuous column over every silo's cells (``NaN`` skipped),
    each rounded to two significant digits; refuses a column that is missing everywhere or constant."""
    values = np.concatenate([v[~np.isnan(v)] for v, _ in columns])
    sources = ", ".join(src for _, src in columns)
    if values.size == 0:
        raise DataError(f"column {name!r} has all values missing in every silo ({sources}); expected at least one "
                        "observed value. Remove the column.")
    if np.ptp(values) == 0:
        raise SchemaError(f"column {name!r} is continuous and constant in every silo ({sources}); a constant "
                          "column carries no information: remove it.")
    scale = round_significant(float(np.std(values)))
    if scale <= 0:      # a spread below 1e-300 of the mean: the rounding cannot keep it
        raise SchemaError(f"column {name!r}: its values barely vary ({sources}); remove it or rescale it.")
    return round_significant(float(np.mean(values))), scale


def standardised(values: np.ndarray | None, variables) -> np.ndarray | None:
    """``(x - location) / scale`` of every continuous variable (the model's scale); None when there are none."""
    if values is None or not len(variables):
        return None
    loc = np.array([v.location for v in variables])
    scale = np.array([v.scale for v in variables])
    return np.ascontiguousarray((np.asarray(values, dtype=np.float64) - loc) / scale)
