"""Readers: CSV, pandas DataFrames and Parquet (extra ``vcmc[parquet]``) to :class:`SiloData`.

Every cell is read as text first (Python strings, no automatic NA conversion), so a code such as ``"01"`` or
``"1.0"`` is never silently reinterpreted; then the cells listed in ``na_values`` become missing values
(``MISSING``), keeping their rows so row identifiers stay aligned with the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from vcmc.data.schema import (
    DEFAULT_NA_VALUES,
    Schema,
    SiloData,
    Variable,
    _fmt_values,
    column_labels,
    factorize_labels,
    sort_modalities,
)
from vcmc.data.validate import check_columns_observed, check_n_rows, check_same_schema
from vcmc.exceptions import DataError, SchemaError

__all__ = ["from_dataframe", "infer_schema", "read_csv", "read_parquet", "read_silos", "split_by_column"]

#: Default limit on distinct values of a categorical column: more looks like free text or an identifier.
MAX_LEVELS = 50


# -- raw reading ---------------------------------------------------------------------------------------
def _check_file(path: Path) -> None:
    if not path.exists():
        raise DataError(f"cannot read file {str(path)!r}: it does not exist; expected a CSV/Parquet file "
                        "with a header row of variable names.")
    if path.is_dir():
        raise DataError(f"cannot read file {str(path)!r}: it is a directory; expected a data file.")
    if path.stat().st_size == 0:
        raise DataError(f"file {str(path)!r} is empty; expected a header row of variable names and at least "
                        "2 data rows.")


def _read_csv_frame(path, *, sep: str = ",", encoding: str = "utf-8") -> pd.DataFrame:
    p = Path(path)
    _check_file(p)
    try:
        # dtype=object, not dtype=str: the same Python strings, but with dtype=str pandas >= 3 converts every
        # column to its Arrow-backed string dtype, more than half of read_csv's time on a 290,000 x 80
        # cohort, for nothing: the encoder factorizes the cells right after.
        df = pd.read_csv(p, dtype=object, keep_default_na=False, na_filter=False, sep=sep, encoding=encoding)
    except pd.errors.EmptyDataError as err:
        raise DataError(f"file {str(p)!r} is empty; expected a header row of variable names and at least 2 "
                        "data rows.") from err
    except pd.errors.ParserError as err:
        raise DataError(f"cannot parse file {str(p)!r} as CSV (separator {sep!r}): {err}. "
                        "Expected one header row and the same number of fields on every line.") from err
    except UnicodeDecodeError as err:
        raise DataError(f"cannot read file {str(p)!r}: not {encoding} text ({err.reason} at byte "
                        f"{err.start}); pass encoding=... or re-export as UTF-8.") from err
    except OSError as err:
        raise DataError(f"cannot read file {str(p)!r}: {err.strerror or err}.") from err
    return df


def _read_parquet_frame(path) -> pd.DataFrame:
    try:
        import pyarrow  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise DataError(f"reading Parquet file {str(path)!r} needs pyarrow, which is not installed; install "
                        "the extra: pip install 'vcmc[parquet]'.") from err
    p = Path(path)
    _check_file(p)
    try:
        return pd.read_parquet(p)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read file {str(p)!r} as Parquet: {err}.") from err


def _read_any(path) -> pd.DataFrame:
    p = Path(path)
    if p.suffix.lower() in (".parquet", ".pq"):
        return _read_parquet_frame(p)
    return _read_csv_frame(p)


def _source_of(obj, i: int) -> str:
    if isinstance(obj, str | os.PathLike):
        return str(obj)
    return f"data frame {i + 1}"


def _pop_id_column(df: pd.DataFrame, id_column, source: str) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Remove the identifier column; return the frame and the identifiers (checked distinct)."""
    if id_column is None:
        return df, None
    cols = [str(c) for c in df.columns]
    if isinstance(id_column, int | np.integer) and not isinstance(id_column, bool):
        if not 0 <= int(id_column) < len(cols):
            raise DataError(f"{source}: id_column={id_column} is out of range; the file has {len(cols)} "
                            "columns (positions start at 0).")
        pos = int(id_column)
    else:
        name = str(id_column)
        if name in cols:
            pos = cols.index(name)
        elif name == "" and cols and cols[0].startswith("Unnamed: 0"):
            pos = 0  # an empty header cell (R's write.csv row names) is read by pandas as "Unnamed: 0"
        else:
            raise SchemaError(f"{source}: id_column {name!r} is not a column; found {_fmt_values(cols, 20)}.")
    ids = df.iloc[:, pos].to_numpy()
    dup = pd.Series(ids).duplicated(keep=False).to_numpy()
    if dup.any():
        raise DataError(f"{source}, column {cols[pos]!r}: row identifiers {_fmt_values(pd.unique(ids[dup]))} "
                        "appear more than once; expected one row per individual.")
    return df.drop(columns=df.columns[pos]), ids


def _frame_of(obj, i: int, id_column, *, drop: str | None = None) -> tuple[pd.DataFrame, str]:
    source = _source_of(obj, i)
    if isinstance(obj, pd.DataFrame):
        df = obj
    elif isinstance(obj, SiloData):
        return obj.to_frame().reset_index(drop=True), obj.source or obj.name
    elif isinstance(obj, str | os.PathLike):
        df = _read_any(obj)
    else:
        raise DataError(f"expected a file path or a pandas DataFrame; got {type(obj).__name__}.")
    df, _ = _pop_id_column(df, id_column, source)
    if drop is not None and drop in df.columns:
        df = df.drop(columns=drop)
    return df, source


# -- schema inference ----------------------------------------------------------------------------------
def infer_schema(frames_or_paths, *, max_levels: int = MAX_LEVELS, na_values=DEFAULT_NA_VALUES,
                 id_column=None) -> Schema:
    """Infer the shared schema from every silo's data: the union of the labels observed in all silos.

    Parameters
    ----------
    frames_or_paths : DataFrame, path, or a sequence of them
        One entry per silo (a file path or a data frame); column order is taken from the first.
    max_levels : int
        Largest number of distinct values a categorical column may have; more looks like free text or an
        identifier and is an error.
    na_values : iterable of str
        Cells read as missing.
    id_column : int or str, optional
        Identifier column to leave out (position or name), the same in every source.

    Returns
    -------
    Schema
        Modalities sorted numerically when every label is a number, lexicographically otherwise.

    Raises
    ------
    SchemaError
        A column missing from one silo, a variable with a single modality, a column with more than
        ``max_levels`` distinct values.
    DataError
        An unreadable or empty file, a column missing in every row of every silo.
    """
    if isinstance(frames_or_paths, pd.DataFrame | str | os.PathLike | SiloData):
        frames_or_paths = [frames_or_paths]
    items = list(frames_or_paths)
    if not items:
        raise DataError("infer_schema needs at least one data frame or file; got none.")
    if int(max_levels) < 2:
        raise SchemaError(f"max_levels must be an integer >= 2; got {max_levels!r}.")
    frames = [_frame_of(obj, i, id_column) for i, obj in enumerate(items)]
    return _infer_from_frames(frames, max_levels=max_levels, na_values=na_values)


def _infer_from_frames(frames: list[tuple[pd.DataFrame, str]], *, max_levels: int, na_values) -> Schema:
    """:func:`infer_schema` on (frame, source description) pairs."""
    if int(max_levels) < 2:
        raise SchemaError(f"max_levels must be an integer >= 2; got {max_levels!r}.")
    first_df, first_src = frames[0]
    columns = [str(c) for c in first_df.columns]
    if not columns:
        raise DataError(f"{first_src}: has no columns; expected a header row of variable names.")
    for df, src in frames:
        check_n_rows(len(df), src)     # a silo of one row makes every column constant: say the real problem
        cols = [str(c) for c in df.columns]
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise SchemaError(f"{src}: column(s) {_fmt_values(dup)} appear more than once; expected distinct "
                              "variable names.")
        absent = [c for c in columns if c not in cols]
        if absent:
            raise SchemaError(f"{src}: column(s) {_fmt_values(absent)} are missing (present in {first_src}); "
                              "expected every silo to have the same variables.")
        extra = [c for c in cols if c not in columns]
        if extra:
            raise SchemaError(f"{src}: column(s) {_fmt_values(extra)} are not in {first_src}; expected every "
                              "silo to have the same variables.")

    levels: dict[str, set] = {c: set() for c in columns}
    for df, src in frames:
        df = df.set_axis([str(c) for c in df.columns], axis=1)
        for c in columns:
            col = df[c]
            n_raw = col.nunique(dropna=True)
            # Cheap guard before turning every distinct value into text: an identifier column with a
            # million values should fail fast. At most len(na_values) distinct raw values can be NA strings.
            if n_raw > max_levels + len(tuple(na_values or ())):
                observed = np.asarray(pd.unique(col.dropna().to_numpy())[:3], dtype=object)
                n_levels = n_raw
            else:
                _, observed = factorize_labels(col, na_values)
                observed = np.asarray(observed, dtype=object)
                n_levels = observed.size
            if n_levels > max_levels:
                raise SchemaError(
                    f"{src}, column {c!r}: {n_levels} distinct values "
                    f"(e.g. {_fmt_values(observed[:3])}); "
                    f"expected a categorical variable with at most max_levels={max_levels} modalities. Free "
                    "text or identifiers must be removed (use id_column= for a row identifier), or raise "
                    "max_levels.")
            levels[c].update(observed.tolist())
    variables = []
    sources = ", ".join(src for _, src in frames)
    for c in columns:
        mods = sort_modalities(levels[c])
        if len(mods) == 0:
            raise DataError(f"column {c!r} has all values missing in every silo ({sources}); "
                            "expected at least one observed value. Remove the column.")
        if len(mods) > max_levels:
            raise SchemaError(f"column {c!r}: {len(mods)} distinct values across silos ({sources}); "
                              f"expected at most max_levels={max_levels} modalities.")
        if len(mods) == 1:
            raise SchemaError(f"column {c!r} has a single modality {mods[0]!r} in every silo ({sources}); "
                              "expected at least 2 modalities. A constant column carries no information: "
                              "remove it.")
        variables.append(Variable(c, mods))
    return Schema(tuple(variables))


def _as_schema(schema) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    if isinstance(schema, str | os.PathLike):
        return Schema.from_json(schema)
    raise SchemaError(f"schema must be a vcmc.data.Schema or a path to a schema JSON file; got "
                      f"{type(schema).__name__}.")


# -- one silo --------------------------------------------------------------------------------------------
def from_dataframe(df: pd.DataFrame, *, schema=None, name: str = "silo", source: str | None = None,
                   id_column=None, na_values=DEFAULT_NA_VALUES, max_levels: int = MAX_LEVELS) -> SiloData:
    """Encode a pandas DataFrame (one silo) with the shared schema.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per individual; exactly the schema's columns (plus ``id_column`` if given).
    schema : Schema or path, optional
        The shared schema. Inferred from this frame alone when omitted (single-silo use; for several silos
        infer it from all of them with :func:`infer_schema`).
    name : str
        Silo name.
    source : str, optional
        Description for error messages (default: ``"data frame <name>"``).
    id_column : int or str, optional
        Column holding row identifiers, removed from the data and kept as ``SiloData.row_ids``.
    na_values : iterable of str
        Cells read as missing; ``NaN``/``None`` are always missing.
    max_levels : int
        Used only when inferring the schema.

    Returns
    -------
    SiloData
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"from_dataframe expects a pandas DataFrame; got {type(df).__name__}.")
    source = source or f"data frame {name!r}"
    df, ids = _pop_id_column(df, id_column, source)
    check_n_rows(len(df), source)
    schema = _as_schema(schema)
    if schema is None:
        schema = _infer_from_frames([(df, source)], max_levels=max_levels, na_values=na_values)
    codes = schema.encode(df, source=source, na_values=na_values)
    check_columns_observed(codes, schema, source)
    return SiloData(name=str(name), codes=codes, schema=schema, source=source, row_ids=ids)


def read_csv(path, *, schema=None, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
             sep: str = ",", encoding: str = "utf-8", max_levels: int = MAX_LEVELS) -> SiloData:
    """Read one silo's CSV file (header row of variable names, one row per individual).

    Parameters
    ----------
    path : str or path-like
        The file.
    schema : Schema or path to a schema JSON, optional
        The shared schema; inferred from this file alone when omitted.
    name : str, optional
        Silo name (default: the file stem, e.g. ``"silo_1"``).
    id_column : int or str, optional
        Row identifier column (position or name; ``""`` selects an unnamed first column as written by R).
    na_values : iterable of str
        Cells read as missing (default: empty, NA, N/A, NaN, nan, NULL, null).
    sep, encoding : str
        CSV separator and text encoding.
    max_levels : int
        Used only when inferring the schema.

    Returns
    -------
    SiloData
    """
    p = Path(path)
    df = _read_csv_frame(p, sep=sep, encoding=encoding)
    return from_dataframe(df, schema=schema, name=name or p.stem, source=str(p), id_column=id_column,
                          na_values=na_values, max_levels=max_levels)


def read_parquet(path, *, schema=None, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
                 max_levels: int = MAX_LEVELS) -> SiloData:
    """Read one silo's Parquet file (needs the ``parquet`` extra: pyarrow). Arguments as :func:`read_csv`."""
    p = Path(path)
    df = _read_parquet_frame(p)
    return from_dataframe(df, schema=schema, name=name or p.stem, source=str(p), id_column=id_column,
                          na_values=na_values, max_levels=max_levels)


def read_rows(path, schema, *, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
              quote_values: bool = False) -> SiloData:
    """Rows to be scored under a saved fit (``vcmc predict``): CSV or Parquet, encoded with ``schema``.

    Unlike a silo's reader it accepts any number of rows (one person is enough) and columns missing in
    every row (they are skipped when scoring), but the schema is required and applied exactly as in the
    fit: a value that is not a modality of the schema is an error naming the file and the column, never
    mapped to a neighbouring code (without quoting the value unless ``quote_values``).
    """
    p = Path(path)
    _check_file(p)
    df = _read_any(p)
    source = str(p)
    df, ids = _pop_id_column(df, id_column, source)
    if len(df) == 0:
        raise DataError(f"{source}: has no data row; expected at least one person (one row each).")
    schema = _as_schema(schema)
    if schema is None:
        raise SchemaError(f"{source}: rows are scored with the fit's schema; none was given.")
    codes = schema.encode(df, source=source, na_values=na_values, quote_values=quote_values)
    return SiloData(name=str(name or p.stem), codes=codes, schema=schema, source=source, row_ids=ids)


# -- several silos -----------------------------------------------------------------------------------------
def read_silos(paths: Sequence, *, schema=None, names: Sequence[str] | None = None, id_column=None,
               na_values=DEFAULT_NA_VALUES, max_levels: int = MAX_LEVELS) -> list[SiloData]:
    """Read one file per silo (CSV, or Parquet by extension) with one shared schema.

    When ``schema`` is omitted it is inferred from all files together, so a silo lacking a modality still
    uses the shared coding. Silo names default to the file stems.
    """
    paths = list(paths)
    if not paths:
        raise DataError("read_silos needs at least one file; got none.")
    if names is not None and len(names) != len(paths):
        raise DataError(f"names must give one name per file: {len(paths)} files, {len(names)} names.")
    frames = []
    for p in paths:
        df, ids = _pop_id_column(_read_any(p), id_column, str(p))
        frames.append((df, ids))
    schema = _as_schema(schema)
    if schema is None:
        schema = _infer_from_frames([(f, str(p)) for (f, _), p in zip(frames, paths, strict=True)],
                                    max_levels=max_levels, na_values=na_values)
    silos = []
    for i, (p, (df, ids)) in enumerate(zip(paths, frames, strict=True)):
        name = names[i] if names is not None else Path(p).stem
        silo = from_dataframe(df, schema=schema, name=name, source=str(p), na_values=na_values)
        if ids is not None:
            silo = SiloData(silo.name, silo.codes, silo.schema, silo.source, row_ids=ids)
        silos.append(silo)
    check_same_schema(silos)
    return silos


def split_by_column(path_or_df, column: str, *, schema=None, id_column=None, na_values=DEFAULT_NA_VALUES,
                    max_levels: int = MAX_LEVELS) -> list[SiloData]:
    """Split one table into silos by the value of ``column`` (e.g. a hospital identifier).

    Parameters
    ----------
    path_or_df : path or pandas.DataFrame
        The pooled table (CSV, or Parquet by extension).
    column : str
        Column naming each row's silo; removed from the data. Silos are ordered by this value (numerically
        when every value is a number).
    schema : Schema or path, optional
        Shared schema; inferred from the whole table when omitted.
    id_column : int or str, optional
        Row identifier column. Without it, ``row_ids`` hold the 0-based row positions in the whole table.

    Returns
    -------
    list of SiloData
        Named by the silo value; ``source`` = ``"<file> (<column>=<value>)"``.

    Raises
    ------
    DataError
        The silo column is absent or has missing values (a row without a silo cannot be placed).
    """
    src = str(path_or_df) if isinstance(path_or_df, str | os.PathLike) else "data frame"
    df = path_or_df if isinstance(path_or_df, pd.DataFrame) else _read_any(path_or_df)
    df, ids = _pop_id_column(df, id_column, src)
    if ids is None:
        ids = np.arange(len(df))
    cols = [str(c) for c in df.columns]
    if str(column) not in cols:
        raise DataError(f"{src}: silo column {column!r} is not a column; found {_fmt_values(cols, 20)}.")
    df = df.set_axis(cols, axis=1)
    silo_of = column_labels(df[str(column)], na_values)
    if silo_of.isna().any():
        rows = np.flatnonzero(silo_of.isna().to_numpy())
        raise DataError(f"{src}, column {column!r}: rows {_fmt_values(rows.tolist())} (0-based) have "
                        "no silo; expected a silo name in every row.")
    data = df.drop(columns=str(column))
    schema = _as_schema(schema)
    if schema is None:
        schema = _infer_from_frames([(data, src)], max_levels=max_levels, na_values=na_values)
    values = silo_of.to_numpy()
    silos = []
    for v in sort_modalities(pd.unique(values)):
        mask = values == v
        silo = from_dataframe(data.loc[mask], schema=schema, name=str(v), source=f"{src} ({column}={v})",
                              na_values=na_values)
        silos.append(SiloData(silo.name, silo.codes, schema, silo.source, row_ids=np.asarray(ids)[mask]))
    return silos
