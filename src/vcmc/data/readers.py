"""Readers: CSV, pandas DataFrames and Parquet (extra ``vcmc[parquet]``) to :class:`SiloData`.

Every cell is read as text first (Python strings, no automatic NA conversion), so a code such as ``"01"`` or
``"1.0"`` is never silently reinterpreted; then the empty cells and the cells listed in ``na_values`` (or
the schema's ``na_values``) become missing values (``MISSING``), keeping their rows so row numbers stay
aligned with the file. Nothing else is ever turned into a missing value or recoded: a CSV line with too few
or too many fields, a blank line inside the data, a duplicated header are errors naming the file and the
line, and schema inference refuses what it would have to guess (labels that differ only by white space or
case, a missing-value spelling such as "NA", identifier-like or many-level columns, modalities seen in
fewer rows than the disclosure minimum), naming the file, the column, the values and the fix.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from vcmc.data.normalise import NO_NORMALISATION, SUSPECT_NA_TOKENS, Normalisation, number_of
from vcmc.data.schema import (
    DEFAULT_NA_VALUES,
    ContinuousVariable,
    Schema,
    SiloData,
    Variable,
    column_labels,
    factorize_labels,
    format_values,
    sort_modalities,
)
from vcmc.data.validate import check_columns_observed, check_n_rows, check_same_schema
from vcmc.exceptions import DataError, SchemaError

__all__ = ["from_dataframe", "infer_schema", "read_csv", "read_parquet", "read_silos", "split_by_column"]

#: Default limit on distinct values of a categorical column: more looks like free text or an identifier.
MAX_LEVELS = 50
#: A column with at least this many distinct values in a silo, and more than half as many distinct values as
#: observed cells there (fewer than two rows per value on average), is refused by schema inference: it is a
#: row identifier (every value distinct) or a numeric / free-text variable (an age in years, a date), whose
#: modalities a silo of that size cannot estimate. A schema file that lists the modalities overrides it.
MANY_LEVELS = 10


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
        _check_csv_structure(p, None, sep=sep, encoding=encoding)    # before pandas repairs anything
        # dtype=object, not dtype=str: the same Python strings, but with dtype=str pandas >= 3 converts every
        # column to its Arrow-backed string dtype, more than half of read_csv's time on a 290,000 x 80
        # cohort, for nothing: the encoder factorizes the cells right after. index_col=False: pandas would
        # otherwise make the first column the index when every data line has one field more than the
        # header (_check_csv_structure reports it).
        df = pd.read_csv(p, dtype=object, keep_default_na=False, na_filter=False, sep=sep, encoding=encoding,
                         index_col=False)
    except pd.errors.EmptyDataError as err:
        raise DataError(f"file {str(p)!r} is empty; expected a header row of variable names and at least 2 "
                        "data rows.") from err
    except pd.errors.ParserError as err:
        raise DataError(f"cannot parse file {str(p)!r} as CSV (separator {sep!r}): {str(err).strip()}. "
                        "Expected one header row and the same number of fields on every line.") from err
    except UnicodeDecodeError as err:
        raise DataError(f"cannot read file {str(p)!r}: not {encoding} text ({err.reason} at byte "
                        f"{err.start}); pass encoding=... or re-export as UTF-8.") from err
    except OSError as err:
        raise DataError(f"cannot read file {str(p)!r}: {err.strerror or err}.") from err
    if len(sep) == 1 and len(df.columns) != _header_width(p, sep, encoding):   # pragma: no cover
        raise DataError(f"{p}: pandas read {len(df.columns)} columns, not the header's.")
    return df


def _header_width(p: Path, sep: str, encoding: str) -> int:
    import csv

    with open(p, newline="", encoding=_check_encoding(encoding)) as fh:
        return len(next(csv.reader(fh, delimiter=sep), []))


def _check_encoding(encoding: str) -> str:
    return "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding


def _check_csv_structure(p: Path, df: pd.DataFrame | None, *, sep: str, encoding: str) -> None:
    """What pandas repairs without a word, refused: a duplicated header (renamed ``V1.1``), a line with
    fewer fields than the header (its missing fields filled in as empty), with more (an error or, on every
    line, an index column), a blank line inside the data (skipped: every later row would change number).

    One pass of the standard ``csv`` module over the records, counting fields only (about a second for a
    290,000 x 80 file); a separator of more than one character (a regular expression) is left to pandas.
    """
    import csv

    if len(sep) != 1:
        return
    with open(p, newline="", encoding=_check_encoding(encoding)) as fh:
        reader = csv.reader(fh, delimiter=sep)
        header = next(reader, None)
        if header is None:
            return
        dup = sorted({h for h in header if header.count(h) > 1})
        if dup:
            raise SchemaError(f"{p}: the header names column(s) {format_values(dup)} more than once; expected "
                              "distinct variable names (a reader would rename the copies, e.g. 'V1.1', and fit "
                              "them as other variables). Rename or remove the duplicated columns.")
        width = len(header)
        blank_line = None
        for record in reader:
            if not record:
                blank_line = blank_line or reader.line_num
                continue
            if blank_line is not None:
                raise DataError(f"{p}, line {blank_line}: blank line inside the data; a skipped line would "
                                "shift the row number of every later row (assignments.csv joins back to the "
                                "file by row). Remove it, or write a line of empty fields "
                                f"({sep * (width - 1)!r}) for an individual with every value missing.")
            if len(record) != width:
                few = len(record) < width
                raise DataError(f"{p}, line {reader.line_num}: {len(record)} fields, expected {width} as in the "
                                "header; " + ("the missing fields would be read as missing values. "
                                              if few else "a field would be dropped or shift the columns. ")
                                + "Fix the line (quote fields that contain the separator).")


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


def read_any(path) -> pd.DataFrame:
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
            raise SchemaError(f"{source}: id_column {name!r} is not a column; found {format_values(cols, 20)}.")
    ids = df.iloc[:, pos].to_numpy()
    dup = pd.Series(ids).duplicated(keep=False).to_numpy()
    if dup.any():
        raise DataError(f"{source}, column {cols[pos]!r}: row identifiers {format_values(pd.unique(ids[dup]))} "
                        "appear more than once; expected one row per individual.")
    return df.drop(columns=df.columns[pos]), ids


def drop_excluded(df: pd.DataFrame, exclude, source: str) -> pd.DataFrame:
    """``df`` without the columns ``exclude`` names (``--exclude``); one absent from the file is an error naming
    the file, since a misspelt name would otherwise leave the real column in the clustering."""
    exclude = [str(c) for c in (exclude or ())]
    if not exclude:
        return df
    cols = [str(c) for c in df.columns]
    absent = [c for c in exclude if c not in cols]
    if absent:
        raise DataError(f"{source}: excluded column(s) {format_values(absent)} (--exclude) are not in the file; "
                        f"found {format_values(cols, 20)}.")
    return df.drop(columns=[c for c in df.columns if str(c) in set(exclude)])


def _declared_id(id_column, schema: Schema | None, df: pd.DataFrame):
    """``id_column`` when given, else the schema's declared identifier column when the file has it."""
    if id_column is not None or schema is None or schema.id_column is None:
        return id_column
    return schema.id_column if schema.id_column in {str(c) for c in df.columns} else None


def _frame_of(obj, i: int, id_column, *, drop: str | None = None, exclude=()) -> tuple[pd.DataFrame, str]:
    source = _source_of(obj, i)
    if isinstance(obj, pd.DataFrame):
        df = obj
    elif isinstance(obj, SiloData):
        return obj.to_frame().reset_index(drop=True), obj.source or obj.name
    elif isinstance(obj, str | os.PathLike):
        df = read_any(obj)
    else:
        raise DataError(f"expected a file path or a pandas DataFrame; got {type(obj).__name__}.")
    df, _ = _pop_id_column(df, id_column, source)
    if drop is not None and drop in df.columns:
        df = df.drop(columns=drop)
    return drop_excluded(df, exclude, source), source


# -- schema inference ----------------------------------------------------------------------------------
def infer_schema(frames_or_paths, *, max_levels: int = MAX_LEVELS, na_values=DEFAULT_NA_VALUES,
                 id_column=None, normalisation: Normalisation = NO_NORMALISATION, min_modality_rows: int = 1,
                 min_modality_rows_flag: str = "min_modality_rows",
                 many_levels: int | None = MANY_LEVELS, continuous=(), categorical=(),
                 proposed: list | None = None, exclude=(), sources=None) -> Schema:
    """Infer the shared schema from every silo's data: the union of the labels observed in all silos.

    Parameters
    ----------
    frames_or_paths : DataFrame, path, or a sequence of them
        One entry per silo (a file path or a data frame); column order is taken from the first.
    max_levels : int
        Largest number of distinct values a categorical column may have; more looks like free text or an
        identifier and is an error.
    na_values : iterable of str
        Cells read as missing (default: only the empty cell).
    id_column : int or str, optional
        Identifier column to leave out (position or name), the same in every source.
    normalisation : Normalisation
        Explicit normalisation of the labels (white space, case); default none.
    min_modality_rows : int
        Fewest rows (over all silos) a modality must be seen in for inference to publish it in the schema
        (default 1: no limit). ``vcmc fit`` passes the disclosure minimum ``privacy.min_cluster_size``
        (``--min-cluster-size``): a modality inferred from fewer rows would be published in the results
        (profiles, posterior draws) although it describes fewer people.
    min_modality_rows_flag : str
        How messages name the setting the user typed (e.g. ``"--min-cluster-size"``).
    many_levels : int or None
        A column with at least this many distinct values in a silo and fewer than two rows per value there
        is refused (identifier-like or many-level; default ``MANY_LEVELS`` = 10); None switches it off.
    continuous : sequence of str, or "auto"
        Columns read as continuous (Gaussian items; ``vcmc.data.continuous``); ``"auto"``: every column whose
        observed cells are all numbers, more than ``CONTINUOUS_LEVELS`` distinct ones, unless named in
        ``categorical`` (default none: every column categorical).
    categorical : sequence of str
        Columns kept categorical under ``continuous="auto"``.
    proposed : list, optional
        Filled with the names of the columns ``"auto"`` made continuous (``vcmc schema`` says so).
    exclude : iterable of str
        Columns left out (``--exclude``: covariates, outcomes, other columns); each must be in every source.
    sources : sequence of str, optional
        How messages name each entry (its file) when data frames are given (default ``"data frame N"``).

    Returns
    -------
    Schema
        Modalities sorted numerically when every label is a number, lexicographically otherwise.

    Raises
    ------
    SchemaError
        A column missing from one silo, a variable with a single modality, a column with more than
        ``max_levels`` distinct values, labels that differ only by white space or case, a value spelled like a
        missing value ("NA") that ``na_values`` does not name, an identifier-like or many-level column
        (``MANY_LEVELS``), a modality seen in fewer than ``min_modality_rows`` rows.
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
    if sources is not None and len(sources) != len(items):
        raise DataError(f"infer_schema: {len(items)} sources but {len(sources)} names for them.")
    frames = [_frame_of(obj, i, id_column, exclude=exclude) for i, obj in enumerate(items)]
    if sources is not None:
        frames = [(df, str(name)) for (df, _), name in zip(frames, sources, strict=True)]
    return _infer_from_frames(frames, max_levels=max_levels, na_values=na_values, normalisation=normalisation,
                              min_modality_rows=min_modality_rows, min_modality_rows_flag=min_modality_rows_flag,
                              many_levels=many_levels, continuous=continuous, categorical=categorical,
                              proposed=proposed)


def _check_columns(frames: list[tuple[pd.DataFrame, str]]) -> list[str]:
    first_df, first_src = frames[0]
    columns = [str(c) for c in first_df.columns]
    if not columns:
        raise DataError(f"{first_src}: has no columns; expected a header row of variable names.")
    for df, src in frames:
        check_n_rows(len(df), src)     # a silo of one row makes every column constant: say the real problem
        cols = [str(c) for c in df.columns]
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise SchemaError(f"{src}: column(s) {format_values(dup)} appear more than once; expected distinct "
                              "variable names.")
        absent = [c for c in columns if c not in cols]
        if absent:
            raise SchemaError(f"{src}: column(s) {format_values(absent)} are missing (present in {first_src}); "
                              "expected every silo to have the same variables.")
        extra = [c for c in cols if c not in columns]
        if extra:
            raise SchemaError(f"{src}: column(s) {format_values(extra)} are not in {first_src}; expected every "
                              "silo to have the same variables.")
    return columns


def _variants(keys, normalisation: Normalisation) -> list[tuple[list[str], str, str]]:
    """Groups of labels that differ only by surrounding white space or by case: (labels, what differs, the
    options that would make them one modality)."""
    groups: dict[str, list[str]] = {}
    for k in keys:
        groups.setdefault(k.strip().casefold(), []).append(k)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        if len({m.strip() for m in members}) == 1:
            kind, flags = "white space", ["--strip-whitespace"]
        elif len({m.casefold() for m in members}) == 1:
            kind, flags = "case", ["--case-insensitive"]
        else:
            kind, flags = "white space and case", ["--strip-whitespace", "--case-insensitive"]
        flags = [f for f in flags if not (f == "--strip-whitespace" and normalisation.strip_whitespace)
                 and not (f == "--case-insensitive" and normalisation.case_insensitive)]
        out.append((sorted(members), kind, " ".join(flags)))
    return out


def _number_variants(keys) -> list[tuple[list[str], float]]:
    """Groups of labels that spell one number differently (``"1"``, ``"1.0"``, ``"01"``): one value typed by
    different programs (a float column exported as ``1.0``, a zero-padded code), which would become
    separate modalities. There is no option to merge them: which spelling is the modality is the user's to
    say, by recoding the files (or by a schema file and a recode)."""
    groups: dict[float, list[str]] = {}
    for k in keys:
        number = number_of(k)
        if number is not None:
            groups.setdefault(number, []).append(k)
    return [(sorted(m, key=lambda x: (len(x), x)), v) for v, m in groups.items() if len(m) > 1]


def _disjoint_codings(columns, files_of, sources) -> list[str]:
    """Columns whose files fall into groups sharing no value, two of them with two values or more (``1``/``2`` in
    one site, ``no``/``yes`` in the others): inferred, each spelling would become a modality of its own and the
    clusters would split by site. A schema file that lists the values is the way to say they are different."""
    out = []
    for c in columns:
        groups: list[tuple[set[str], set[str]]] = []
        for src in sources:
            seen = {lab for lab, where in files_of[c].items() if src in where}
            if not seen:
                continue
            linked = [g for g in groups if g[1] & seen]
            names, labels = {src}, set(seen)
            for g in linked:
                names |= g[0]
                labels |= g[1]
                groups.remove(g)
            groups.append((names, labels))
        # two codings: at least two groups of files with two values or more each (a file whose rows all hold
        # one value of its own, a region, is a fact, warned about when the silos are built, not refused)
        if sum(1 for _, labels in groups if len(labels) > 1) > 1:
            parts = [f"{', '.join(sorted(names))} use {format_values(sort_modalities(labels))}"
                     for names, labels in sorted(groups, key=lambda g: sorted(g[0]))]
            out.append(f"column {c!r}: the files share no value ({'; '.join(parts)}): one coding spelled two ways "
                       "would become separate modalities and split the clusters by file. Recode the files to one "
                       "coding (e.g. yes/no everywhere), or, if they really are different values, give a schema "
                       "file (--schema) that lists them")
    return out


def _one_text(v) -> str:
    return v if isinstance(v, str) else str(v)


def _levels_problem(src: str, c: str, n_levels: int, n_obs: int, shown, max_levels: int,
                    many_levels: int | None) -> None:
    """Refuse a column with too many distinct values: absolutely (``max_levels``) or for its number of
    rows (identifier-like: every value distinct; many-level: fewer than two rows per value)."""
    if many_levels is not None and n_levels >= many_levels and 2 * n_levels > n_obs:
        what = ("every value is distinct: it looks like a row identifier. Give it as the identifier "
                f"(--id-column {c} / id_column={c!r}) or remove it"
                if n_levels >= n_obs else
                "fewer than two rows per value: it looks like a numeric or free-text variable whose "
                "modalities this silo cannot estimate. Declare it continuous (vcmc schema --continuous "
                f"{c}), recode it into fewer categories (e.g. age bands), leave it out of the clustering "
                f"(--exclude {c}, or vcmc schema --covariates/--distal for a covariate or outcome), remove it")
        raise SchemaError(f"{src}, column {c!r}: {n_levels} distinct values in {n_obs} rows "
                          f"(e.g. {format_values(shown[:4], 4)}); {what}, or give a schema file (--schema) that "
                          "lists its modalities if it really is categorical.")
    if n_levels > max_levels:
        raise SchemaError(
            f"{src}, column {c!r}: {n_levels} distinct values (e.g. {format_values(shown[:3], 3)}); expected a "
            f"categorical variable with at most max_levels={max_levels} modalities. Free text or identifiers "
            "must be removed (a row identifier: --id-column / id_column=), or raise max_levels. A covariate or "
            f"outcome (age, a score) stays in the file: --exclude {c} leaves it out of the clustering, or vcmc "
            "schema --covariates/--distal declares it.")


def _infer_from_frames(frames: list[tuple[pd.DataFrame, str]], *, max_levels: int, na_values,
                       normalisation: Normalisation = NO_NORMALISATION, min_modality_rows: int = 1,
                       min_modality_rows_flag: str = "min_modality_rows",
                       many_levels: int | None = MANY_LEVELS, continuous=(), categorical=(),
                       proposed: list | None = None) -> Schema:
    """:func:`infer_schema` on (frame, source description) pairs."""
    if int(max_levels) < 2:
        raise SchemaError(f"max_levels must be an integer >= 2; got {max_levels!r}.")
    columns = _check_columns(frames)
    cont = _continuous_columns(frames, columns, continuous, categorical, na_values, proposed)
    columns = [c for c in columns if c not in cont]
    na_keys = {normalisation.key(str(v)) for v in (na_values or ())}
    counts: dict[str, dict[str, int]] = {c: {} for c in columns}
    files_of: dict[str, dict[str, list[str]]] = {c: {} for c in columns}
    for df, src in frames:
        df = df.set_axis([str(c) for c in df.columns], axis=1)
        for c in columns:
            col = df[c]
            n_raw = col.nunique(dropna=True)
            # Cheap guard before turning every distinct value into text: an identifier column with a
            # million values should fail fast. At most len(na_values) distinct raw values can be NA strings.
            if n_raw > max_levels + len(na_keys):
                observed = tuple(_one_text(v) for v in pd.unique(col.dropna().to_numpy())[:6])
                n_obs = int(col.notna().sum() - (col == "").sum())
                _levels_problem(src, c, n_raw, n_obs, observed, max_levels, many_levels)
            idx, labels = factorize_labels(col, na_values, normalisation=normalisation)
            n_cells = np.bincount(idx[idx >= 0], minlength=len(labels))
            _levels_problem(src, c, len(labels), int(n_cells.sum()), sort_modalities(labels)[:6], max_levels,
                            many_levels)
            for lab, n in zip(labels, n_cells.tolist(), strict=True):
                counts[c][lab] = counts[c].get(lab, 0) + int(n)
                files_of[c].setdefault(lab, []).append(src)
    variables = []
    sources = ", ".join(src for _, src in frames)
    problems: list[str] = []
    for c in columns:
        for members, kind, flags in _variants(counts[c], normalisation):
            where = sorted({f for m in members for f in files_of[c][m]})
            problems.append(f"column {c!r}: {format_values(members)} differ only by {kind} (in "
                            f"{', '.join(where)}); they would become separate modalities. If they are one "
                            f"value, say so with {flags} (recorded in result.json), or give a schema file "
                            "(--schema) listing the modalities")
        for members, number in _number_variants(counts[c]):
            where = sorted({f for m in members for f in files_of[c][m]})
            shown = int(number) if float(number).is_integer() else number
            problems.append(f"column {c!r}: {format_values(members)} are spellings of one number ({shown}) (in "
                            f"{', '.join(where)}); they would become separate modalities. Write one spelling "
                            f"in every file (e.g. {members[0]!r} for each of {format_values(members[1:])}), or give "
                            "a schema file (--schema) if they really are different codes")
    problems += _disjoint_codings(columns, files_of, [src for _, src in frames])
    if problems:
        raise SchemaError(f"schema inference refused ({sources}): " + "; ".join(problems) + ".")
    suspects: dict[str, list[str]] = {}
    for c in columns:
        for lab in sorted(lab for lab in counts[c] if lab.strip() in SUSPECT_NA_TOKENS):
            suspects.setdefault(lab, []).append(f"{c!r} ({counts[c][lab]} rows, in "
                                                f"{', '.join(dict.fromkeys(files_of[c][lab]))})")
    for lab, where in suspects.items():
        problems.append(f"{lab!r} in column(s) {', '.join(where)} is a common spelling of a missing value; say "
                        f"which it is: --na-values {lab.strip()} (na_values=) reads it as missing, a schema file "
                        f"(--schema) listing {lab!r} as a modality keeps it as a value")
    if problems:
        raise SchemaError(f"schema inference refused ({sources}): " + "; ".join(problems) + ".")
    if int(min_modality_rows) > 1:
        for c in columns:
            rare = sorted((lab for lab, n in counts[c].items() if n < int(min_modality_rows)), key=str)
            if rare:
                seen = ", ".join(f"{lab!r} in {counts[c][lab]} row(s) of {', '.join(dict.fromkeys(files_of[c][lab]))}"
                                 for lab in rare[:5])
                problems.append(f"column {c!r}: {seen}{' ...' if len(rare) > 5 else ''}")
        if problems:
            raise SchemaError(
                f"schema inference refused ({sources}): modalities seen in fewer rows of all silos than the disclosure "
                f"minimum ({min_modality_rows_flag} {int(min_modality_rows)}): " + "; ".join(problems)
                + ". A modality "
                "inferred from the data is published in the results (profiles.csv, posterior.nc) although "
                "it describes fewer people than that. Give a schema file (--schema) that lists the "
                "modalities, or merge or recode the rare values in the data (e.g. into an 'other' category).")
    for c in columns:
        mods = sort_modalities(counts[c])
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
    return Schema(tuple(variables), continuous=_continuous_variables(frames, cont, na_values))


def _continuous_columns(frames, columns, continuous, categorical, na_values, proposed) -> list[str]:
    """The columns inference reads as continuous (``infer_schema``'s ``continuous`` and ``categorical``)."""
    from vcmc.data.continuous import looks_continuous

    for what, names in (("continuous", () if continuous == "auto" else continuous), ("categorical", categorical)):
        unknown = [c for c in names if c not in columns]
        if unknown:
            raise SchemaError(f"{what} column(s) {format_values(unknown)} are not columns of the data; found "
                              f"{format_values(columns, 20)}.")
    if continuous != "auto":
        return list(continuous)
    out = []
    for c in columns:
        if c not in categorical and all(looks_continuous(df.set_axis([str(x) for x in df.columns], axis=1)[c],
                                                         na_values) for df, _ in frames):
            out.append(c)
    if proposed is not None:
        proposed.extend(out)
    return out


def _continuous_variables(frames, cont: list[str], na_values) -> tuple[ContinuousVariable, ...]:
    from vcmc.data.continuous import location_and_scale, numeric_column

    out = []
    for c in cont:
        cells = [(numeric_column(df.set_axis([str(x) for x in df.columns], axis=1)[c], na_values, source=src,
                                 name=c), src) for df, src in frames]
        out.append(ContinuousVariable(c, *location_and_scale(cells, c)))
    return tuple(out)


def _as_schema(schema) -> Schema | None:
    if schema is None or isinstance(schema, Schema):
        return schema
    if isinstance(schema, str | os.PathLike):
        return Schema.from_json(schema)
    raise SchemaError(f"schema must be a vcmc.data.Schema or a path to a schema JSON file; got "
                      f"{type(schema).__name__}.")


# -- one silo --------------------------------------------------------------------------------------------
def from_dataframe(df: pd.DataFrame, *, schema=None, name: str = "silo", source: str | None = None,
                   id_column=None, na_values=DEFAULT_NA_VALUES, max_levels: int = MAX_LEVELS,
                   normalisation: Normalisation = NO_NORMALISATION, min_modality_rows: int = 1,
                   changes: dict | None = None) -> SiloData:
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
        Cells read as missing (default: the empty cell); ``NaN``/``None`` are always missing, and so are the
        schema's own ``na_values``.
    max_levels, min_modality_rows : int
        Used only when inferring the schema (see :func:`infer_schema`).
    normalisation : Normalisation
        Explicit normalisation of the labels (default none).
    changes : dict, optional
        Filled with what the normalisation and ``na_values`` changed, ``{column: [(raw, modality or None,
        cells), ...]}``.

    Returns
    -------
    SiloData
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"from_dataframe expects a pandas DataFrame; got {type(df).__name__}.")
    source = source or f"data frame {name!r}"
    schema = _as_schema(schema)
    df, ids = _pop_id_column(df, _declared_id(id_column, schema, df), source)
    check_n_rows(len(df), source)
    if schema is None:
        schema = _infer_from_frames([(df, source)], max_levels=max_levels, na_values=na_values,
                                    normalisation=normalisation, min_modality_rows=min_modality_rows)
    codes = schema.encode(df, source=source, na_values=na_values, normalisation=normalisation, changes=changes)
    check_columns_observed(codes, schema, source)
    return SiloData(name=str(name), codes=codes, schema=schema, source=source, row_ids=ids,
                    values=schema.encode_values(df, source=source, na_values=na_values))


def read_csv(path, *, schema=None, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
             sep: str = ",", encoding: str = "utf-8", max_levels: int = MAX_LEVELS,
             normalisation: Normalisation = NO_NORMALISATION, min_modality_rows: int = 1,
             changes: dict | None = None) -> SiloData:
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
        Cells read as missing (default: only the empty cell; e.g. ``("", "NA")`` for R's exports).
    sep, encoding : str
        CSV separator and text encoding.
    max_levels, min_modality_rows : int
        Used only when inferring the schema.
    normalisation, changes
        As in :func:`from_dataframe`.

    Returns
    -------
    SiloData
    """
    p = Path(path)
    df = _read_csv_frame(p, sep=sep, encoding=encoding)
    return from_dataframe(df, schema=schema, name=name or p.stem, source=str(p), id_column=id_column,
                          na_values=na_values, max_levels=max_levels, normalisation=normalisation,
                          min_modality_rows=min_modality_rows, changes=changes)


def read_parquet(path, *, schema=None, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
                 max_levels: int = MAX_LEVELS, normalisation: Normalisation = NO_NORMALISATION,
                 min_modality_rows: int = 1, changes: dict | None = None) -> SiloData:
    """Read one silo's Parquet file (needs the ``parquet`` extra: pyarrow). Arguments as :func:`read_csv`."""
    p = Path(path)
    df = _read_parquet_frame(p)
    return from_dataframe(df, schema=schema, name=name or p.stem, source=str(p), id_column=id_column,
                          na_values=na_values, max_levels=max_levels, normalisation=normalisation,
                          min_modality_rows=min_modality_rows, changes=changes)


def read_rows(path, schema, *, name: str | None = None, id_column=None, na_values=DEFAULT_NA_VALUES,
              quote_values: bool = False, exclude=()) -> SiloData:
    """Rows to be scored under a saved fit (``vcmc predict``): CSV or Parquet, encoded with ``schema``.

    Unlike a silo's reader it accepts any number of rows (one person is enough) and columns missing in
    every row (they are skipped when scoring), but the schema is required and applied exactly as in the
    fit: a value that is not a modality of the schema is an error naming the file and the column, never
    mapped to a neighbouring code (without quoting the value unless ``quote_values``). Columns that
    ``exclude`` names, and those the schema gives a role (covariates, outcomes, ignored), are left out; the
    schema's identifier column is the default ``id_column``.
    """
    p = Path(path)
    _check_file(p)
    df = read_any(p)
    source = str(p)
    schema = _as_schema(schema)
    df, ids = _pop_id_column(df, _declared_id(id_column, schema, df), source)
    df = drop_excluded(df, exclude, source)
    if len(df) == 0:
        raise DataError(f"{source}: has no data row; expected at least one person (one row each).")
    if schema is None:
        raise SchemaError(f"{source}: rows are scored with the fit's schema; none was given.")
    codes = schema.encode(df, source=source, na_values=na_values, quote_values=quote_values)
    return SiloData(name=str(name or p.stem), codes=codes, schema=schema, source=source, row_ids=ids,
                    values=schema.encode_values(df, source=source, na_values=na_values))


# -- several silos -----------------------------------------------------------------------------------------
def read_silos(paths: Sequence, *, schema=None, names: Sequence[str] | None = None, id_column=None,
               na_values=DEFAULT_NA_VALUES, max_levels: int = MAX_LEVELS,
               normalisation: Normalisation = NO_NORMALISATION, min_modality_rows: int = 1,
               min_modality_rows_flag: str = "min_modality_rows", changes: dict | None = None,
               continuous=(), categorical=(), proposed: list | None = None, exclude=()) -> list[SiloData]:
    """Read one file per silo (CSV, or Parquet by extension) with one shared schema.

    When ``schema`` is omitted it is inferred from all files together (see :func:`infer_schema` for what it
    refuses), so a silo lacking a modality still uses the shared coding. Silo names default to the file
    stems. ``changes``, when given, is filled with ``{silo name: {column: [(raw, modality or None, cells)]}}``;
    ``continuous``, ``categorical`` and ``proposed`` are :func:`infer_schema`'s. ``exclude`` names columns left
    out of the clustering (``--exclude``; each must be in every file); the columns a schema gives a role
    (covariate, outcome, ignored) are left out too, and its identifier column is the default ``id_column``.
    """
    paths = list(paths)
    if not paths:
        raise DataError("read_silos needs at least one file; got none.")
    if names is not None and len(names) != len(paths):
        raise DataError(f"names must give one name per file: {len(paths)} files, {len(names)} names.")
    schema = _as_schema(schema)
    frames = []
    for p in paths:
        raw = read_any(p)
        df, ids = _pop_id_column(raw, _declared_id(id_column, schema, raw), str(p))
        frames.append((drop_excluded(df, exclude, str(p)), ids))
    if schema is None:
        schema = _infer_from_frames([(f, str(p)) for (f, _), p in zip(frames, paths, strict=True)],
                                    max_levels=max_levels, na_values=na_values, normalisation=normalisation,
                                    min_modality_rows=min_modality_rows,
                                    min_modality_rows_flag=min_modality_rows_flag, continuous=continuous,
                                    categorical=categorical, proposed=proposed)
    silos = []
    for i, (p, (df, ids)) in enumerate(zip(paths, frames, strict=True)):
        name = names[i] if names is not None else Path(p).stem
        silo_changes = {} if changes is not None else None
        silo = from_dataframe(df, schema=schema, name=name, source=str(p), na_values=na_values,
                              normalisation=normalisation, changes=silo_changes)
        if silo_changes:
            changes[silo.name] = silo_changes
        if ids is not None:
            silo = dataclasses.replace(silo, row_ids=ids)
        silos.append(silo)
    check_same_schema(silos)
    return silos


def split_by_column(path_or_df, column: str, *, schema=None, id_column=None, na_values=DEFAULT_NA_VALUES,
                    max_levels: int = MAX_LEVELS, normalisation: Normalisation = NO_NORMALISATION,
                    min_modality_rows: int = 1, min_modality_rows_flag: str = "min_modality_rows",
                    changes: dict | None = None,
                    positions: dict | None = None, continuous=(), categorical=(),
                    proposed: list | None = None, exclude=()) -> list[SiloData]:
    """Split one table into silos by the value of ``column`` (e.g. a hospital identifier).

    Parameters
    ----------
    path_or_df : path or pandas.DataFrame
        The pooled table (CSV, or Parquet by extension).
    column : str
        Column naming each row's silo; removed from the data. Silos are ordered by this value (numerically
        when every value is a number). Only the empty cell (and ``na_values``) counts as "no silo".
    schema : Schema or path, optional
        Shared schema; inferred from the whole table when omitted.
    id_column : int or str, optional
        Row identifier column. Without it, ``row_ids`` hold the 0-based row positions in the whole table.
    normalisation, min_modality_rows, min_modality_rows_flag, changes, continuous, categorical, proposed
        As in :func:`read_silos`.
    positions : dict, optional
        Filled with ``{silo name: 0-based positions of its rows in the whole table}`` (the ``row`` of
        ``assignments.csv``, whether or not an ``id_column`` is given).
    exclude : iterable of str
        Columns left out of the clustering (``--exclude``), as in :func:`read_silos`.

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
    df = path_or_df if isinstance(path_or_df, pd.DataFrame) else read_any(path_or_df)
    schema = _as_schema(schema)
    df, ids = _pop_id_column(df, _declared_id(id_column, schema, df), src)
    df = drop_excluded(df, [c for c in exclude if str(c) != str(column)], src)
    where = np.arange(len(df))
    if ids is None:
        ids = where
    cols = [str(c) for c in df.columns]
    if str(column) not in cols:
        raise DataError(f"{src}: silo column {column!r} is not a column; found {format_values(cols, 20)}.")
    df = df.set_axis(cols, axis=1)
    silo_of = column_labels(df[str(column)], na_values)
    if silo_of.isna().any():
        rows = np.flatnonzero(silo_of.isna().to_numpy())
        raise DataError(f"{src}, column {column!r}: rows {format_values(rows.tolist())} (0-based) have "
                        "no silo; expected a silo name in every row.")
    data = df.drop(columns=str(column))
    values = silo_of.to_numpy()
    if schema is None:
        # the silos' own frames, so that the per-silo checks (identifier-like columns) see each silo
        schema = _infer_from_frames([(data.loc[values == v], f"{src} ({column}={v})")
                                     for v in sort_modalities(pd.unique(values))],
                                    max_levels=max_levels, na_values=na_values, normalisation=normalisation,
                                    min_modality_rows=min_modality_rows,
                                    min_modality_rows_flag=min_modality_rows_flag, continuous=continuous,
                                    categorical=categorical, proposed=proposed)
    silos = []
    for v in sort_modalities(pd.unique(values)):
        mask = values == v
        silo_changes = {} if changes is not None else None
        silo = from_dataframe(data.loc[mask], schema=schema, name=str(v), source=f"{src} ({column}={v})",
                              na_values=na_values, normalisation=normalisation, changes=silo_changes)
        if silo_changes:
            changes[silo.name] = silo_changes
        if positions is not None:
            positions[silo.name] = where[mask]
        silos.append(dataclasses.replace(silo, row_ids=np.asarray(ids)[mask]))
    return silos
