"""The schema every silo agrees on, and one silo's encoded data.

A :class:`Schema` is the ordered list of categorical variables and, for each, its ordered modalities. Every
silo encodes its data with the same schema, so code ``k`` of variable ``q`` means the same modality in every
silo even when a silo never observes it. Values outside the schema are errors: nothing is silently dropped
or recoded. Missing values are encoded as :data:`vcmc.model.MISSING` (-1) and keep
their rows, so row identifiers stay aligned with the source file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vcmc.atomic import atomic_write_text
from vcmc.data.normalise import NO_NORMALISATION, Normalisation
from vcmc.exceptions import DataError, SchemaError
from vcmc.model import MISSING

# pandas is imported where it is used: a silo answering from its encoded codes (a Flower ClientApp, a
# worker process) never parses a file and need not pay for it
if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_NA_VALUES", "ROLES", "SCHEMA_FORMAT", "Column", "ContinuousVariable", "SiloData", "Schema",
           "Variable", "column_labels", "factorize_labels", "sort_modalities"]

#: Cell contents read as a missing value unless the caller passes other ``na_values``: only the empty cell.
#: A text such as "NA" is a value (a region code, say) unless ``na_values`` or the schema's ``na_values``
#: says it means "missing"; schema inference refuses to make a modality of one without being told
#: (``vcmc.data.normalise.SUSPECT_NA_TOKENS``).
DEFAULT_NA_VALUES: tuple[str, ...] = ("",)

SCHEMA_FORMAT = "vcmc-schema"
#: Roles of the columns of the silos' files besides the clustering items (docs/design.md §15.4): a covariate
#: of class membership, a distal outcome, a row identifier, or a column left out of every analysis.
ROLES = ("covariate", "outcome", "id", "ignored")
_SCHEMA_VERSION = 1
_CODE_DTYPE = np.int16


def format_values(values, limit: int = 5) -> str:
    vals = list(values)
    shown = ", ".join(repr(v) for v in vals[:limit])
    return shown + (f", ... ({len(vals)} in all)" if len(vals) > limit else "")


def sort_modalities(labels) -> tuple[str, ...]:
    """Sort modality labels: numerically when every label is a number ("2" < "10"), else lexicographically.

    Parameters
    ----------
    labels : iterable of str
        Distinct modality labels.

    Returns
    -------
    tuple of str
    """
    labels = [str(x) for x in set(labels)]
    try:
        keyed = [(float(x), x) for x in labels]
    except ValueError:
        return tuple(sorted(labels))
    if any(math.isnan(k) for k, _ in keyed):
        return tuple(sorted(labels))
    return tuple(x for _, x in sorted(keyed))


def factorize_labels(series: pd.Series, na_values=DEFAULT_NA_VALUES, *,
                     normalisation: Normalisation = NO_NORMALISATION,
                     changes: list | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Distinct modality labels of one column and the index of each cell's label (-1 = missing).

    Cells are hashed once with :func:`pandas.factorize`; only the distinct values are turned into text, so
    the cost is one pass over the rows whatever the dtype. Numbers are written without a spurious decimal
    part (``1.0`` -> ``"1"``), so a column that pandas read as float because of missing values codes the
    same as the integer column of another silo.

    Parameters
    ----------
    series : pandas.Series
        One column of a silo's data frame.
    na_values : iterable of str
        Strings meaning "missing" (after conversion to text and normalisation); ``NaN``/``None`` are always
        missing.
    normalisation : Normalisation
        Explicit normalisation of the labels (default none: a cell's text is its label).
    changes : list, optional
        When given, ``(raw label, normalised label or None for missing, number of cells)`` is appended for
        every distinct label the normalisation or ``na_values`` changed (what ``vcmc fit`` records).

    Returns
    -------
    index : numpy.ndarray of shape (n,), int64
        Position of each cell's label in ``labels``; -1 for a missing cell.
    labels : tuple of str
        Distinct observed labels, in order of first appearance.
    """
    import pandas as pd

    raw, uniques = pd.factorize(series, use_na_sentinel=True)
    na = {normalisation.key(str(v)) for v in (na_values or ())}
    labels: list[str] = []
    where: dict[str, int] = {}
    table = np.full(len(uniques) + 1, -1, dtype=np.int64)  # last slot: factorize's -1 (missing)
    counts = None
    for j, u in enumerate(uniques):  # loop over DISTINCT values only
        text = _one_label(u)
        lab = normalisation.key(text)
        if lab in na:
            if changes is not None and text != "":
                counts = np.bincount(raw[raw >= 0], minlength=len(uniques)) if counts is None else counts
                changes.append((text, None, int(counts[j])))
            continue
        if changes is not None and lab != text:
            counts = np.bincount(raw[raw >= 0], minlength=len(uniques)) if counts is None else counts
            changes.append((text, lab, int(counts[j])))
        if lab not in where:  # e.g. 1 and "1" in an object column are one modality
            where[lab] = len(labels)
            labels.append(lab)
        table[j] = where[lab]
    return table[np.asarray(raw, dtype=np.int64)], tuple(labels)


def column_labels(series: pd.Series, na_values=DEFAULT_NA_VALUES) -> pd.Series:
    """Turn one column into modality labels (object dtype of ``str``), missing cells as ``None``.

    See :func:`factorize_labels` for the conversion rules.
    """
    import pandas as pd

    idx, labels = factorize_labels(series, na_values)
    lookup = np.array([*labels, None], dtype=object)
    return pd.Series(lookup[idx], index=series.index, dtype=object)


def _one_label(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _describe_normalisation(normalisation: Normalisation) -> str:
    opts = [flag for flag, on in (("--strip-whitespace", normalisation.strip_whitespace),
                                  ("--case-insensitive", normalisation.case_insensitive)) if on]
    return " and ".join(opts) if opts else "no normalisation"


def _unknown_value_hint(bad, modalities, normalisation: Normalisation) -> str:
    """The fix for values outside the schema that are near a modality (white space, case, a missing text)."""
    from vcmc.data.normalise import SUSPECT_NA_TOKENS, number_of

    hints = []
    stripped = {m.strip(): m for m in modalities}
    folded = {m.strip().casefold(): m for m in modalities}
    for b in (str(x) for x in bad):
        if not normalisation.strip_whitespace and b != b.strip() and b.strip() in stripped:
            hints.append(f"{b!r} is {stripped[b.strip()]!r} with surrounding white space: --strip-whitespace "
                         "reads it as that modality (recorded in result.json). ")
        elif not normalisation.case_insensitive and b.strip().casefold() in folded:
            hints.append(f"{b!r} differs from {folded[b.strip().casefold()]!r} only by case"
                         f"{' or white space' if b != b.strip() else ''}: --case-insensitive"
                         f"{' --strip-whitespace' if b != b.strip() else ''} reads it as that modality "
                         "(recorded in result.json). ")
        elif number_of(b) is not None and any(number_of(m) == number_of(b) for m in modalities):
            same = next(m for m in modalities if number_of(m) == number_of(b))
            hints.append(f"{b!r} spells the number of modality {same!r} differently: write {same!r} in the "
                         "file. ")
        elif b in SUSPECT_NA_TOKENS:
            hints.append(f"{b!r} is a common spelling of a missing value: --na-values {b} reads it as missing. ")
    return "".join(dict.fromkeys(hints))


@dataclass(frozen=True)
class Variable:
    """One categorical variable and its ordered modalities.

    Parameters
    ----------
    name : str
        Column name, non-empty.
    modalities : tuple of str
        Ordered, distinct labels; at least 2 (a variable with one modality carries no information).
    """

    name: str
    modalities: tuple[str, ...]

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"Variable name must be a non-empty string; got {self.name!r}.")
        mods = tuple(str(m) for m in self.modalities)
        object.__setattr__(self, "modalities", mods)
        if len(mods) < 2:
            raise SchemaError(
                f"Variable {self.name!r} has {len(mods)} modality ({format_values(mods)}); "
                "expected at least 2. "
                "A variable with a single modality carries no information: drop the column.")
        if len(set(mods)) != len(mods):
            dup = sorted({m for m in mods if mods.count(m) > 1})
            raise SchemaError(f"Variable {self.name!r} lists modalities more than once: {format_values(dup)}; "
                              "expected distinct modalities.")

    @property
    def n_modalities(self) -> int:
        """Number of modalities K^q."""
        return len(self.modalities)


@dataclass(frozen=True)
class ContinuousVariable:
    """One continuous variable, a Gaussian item of the model (docs/design.md §17.2): its column ``name``
    (non-empty), the ``location`` and ``scale > 0`` of the model's ``(x - location) / scale`` (the estimates are
    reported back on the original scale; ``vcmc.data.continuous`` infers them as the pooled mean and standard
    deviation at two significant digits) and, for the report, the ``unit`` of the values (default none)."""

    name: str
    location: float
    scale: float
    unit: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"Variable name must be a non-empty string; got {self.name!r}.")
        for what in ("location", "scale"):
            value = getattr(self, what)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SchemaError(f"Continuous variable {self.name!r}: {what} must be a finite number; got {value!r}.")
            object.__setattr__(self, what, float(value))
        if self.scale <= 0:
            raise SchemaError(f"Continuous variable {self.name!r}: scale must be > 0; got {self.scale!r}.")
        object.__setattr__(self, "unit", str(self.unit))

    def to_dict(self) -> dict:
        out = {"name": self.name, "location": self.location, "scale": self.scale}
        return {**out, "unit": self.unit} if self.unit else out


@dataclass(frozen=True)
class Column:
    """A column of the silos' files that is not a clustering item, and its role (docs/design.md §15.4).

    Parameters
    ----------
    name : str
        The column's header.
    role : str
        One of ``ROLES``: ``"covariate"`` (predicts class membership: ``vcmc fit --covariates``),
        ``"outcome"`` (a distal outcome: ``--distal``), ``"id"`` (the row identifier: ``--id-column``) or
        ``"ignored"`` (left out of every analysis: ``--exclude``).
    kind : str or None
        For a covariate or outcome, ``"numeric"`` or ``"categorical"`` when stated; None: inferred from the
        values when it is used.
    """

    name: str
    role: str
    kind: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"a schema column needs a non-empty name; got {self.name!r}.")
        if self.role not in ROLES:
            raise SchemaError(f"schema column {self.name!r}: role {self.role!r} is not one of {', '.join(ROLES)} "
                              "(the clustering items are the schema's 'variables').")
        if self.kind is not None and (self.role not in ("covariate", "outcome")
                                      or self.kind not in ("numeric", "categorical")):
            raise SchemaError(f"schema column {self.name!r}: 'kind' is 'numeric' or 'categorical', and only for a "
                              f"covariate or outcome; got role {self.role!r}, kind {self.kind!r}.")

    def spec(self) -> str:
        """``NAME`` or ``NAME:KIND``, as ``--covariates`` and ``--distal`` take it."""
        return self.name if self.kind is None else f"{self.name}:{self.kind}"


@dataclass(frozen=True)
class Schema:
    """Ordered categorical variables with ordered modalities, shared by every silo.

    Parameters
    ----------
    variables : tuple of Variable
        In column order; names distinct.
    na_values : tuple of str
        Cell texts that mean "missing" in every silo's files (default none beyond the empty cell), e.g.
        ``("NA", "-9")``; none may also be a modality. Written to the JSON only when given, so the
        fingerprint of a schema without them is unchanged.
    continuous : tuple of ContinuousVariable
        Continuous variables (Gaussian items), after the categorical ones in the model's layout; written to the
        JSON only when there are some, so the fingerprint of a categorical schema is unchanged.
    columns : tuple of Column
        The other columns of the silos' files and their roles (covariate, outcome, id, ignored): every
        command leaves them out of the clustering, and ``vcmc fit`` uses the covariates and outcomes as
        ``--covariates`` and ``--distal`` when those flags are not given. Written to the JSON only when
        given, and not part of the fingerprint (which identifies the clustering's coding).
    """

    variables: tuple[Variable, ...]
    na_values: tuple[str, ...] = ()
    continuous: tuple[ContinuousVariable, ...] = ()
    columns: tuple[Column, ...] = ()

    def __post_init__(self):
        vs = tuple(self.variables)
        object.__setattr__(self, "variables", vs)
        cont = tuple(self.continuous)
        object.__setattr__(self, "continuous", cont)
        if not vs:
            raise SchemaError("A schema needs at least one variable (categorical); got none"
                              + (" (a model of continuous variables alone is not supported yet)." if cont else "."))
        for v in vs:
            if not isinstance(v, Variable):
                raise SchemaError(f"Schema variables must be vcmc.data.Variable; got {type(v).__name__}.")
        for v in cont:
            if not isinstance(v, ContinuousVariable):
                raise SchemaError(f"Schema continuous variables must be vcmc.data.schema.ContinuousVariable; got "
                                  f"{type(v).__name__}.")
        names = [v.name for v in vs] + [v.name for v in cont]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise SchemaError(f"Schema has duplicated variable names {format_values(dup)}; expected distinct.")
        if isinstance(self.na_values, str):
            raise SchemaError(f"Schema na_values must be a list of cell texts; got the string {self.na_values!r}.")
        na = tuple(str(v) for v in self.na_values)
        object.__setattr__(self, "na_values", na)
        for v in vs:
            both = [m for m in v.modalities if m in na]
            if both:
                raise SchemaError(f"Schema variable {v.name!r}: {format_values(both)} is both a modality and one "
                                  "of the schema's na_values; a cell text cannot mean a value and 'missing'. "
                                  "Remove it from one of the two lists.")
        cols = tuple(self.columns)
        object.__setattr__(self, "columns", cols)
        for c in cols:
            if not isinstance(c, Column):
                raise SchemaError(f"Schema columns must be vcmc.data.schema.Column; got {type(c).__name__}.")
        other = [c.name for c in cols]
        twice = sorted({n for n in other if other.count(n) > 1} | (set(other) & set(names)))
        if twice:
            raise SchemaError(f"Schema names column(s) {format_values(twice)} twice (as a variable and with a role, "
                              "or with two roles); give each column one role.")
        ids = [c.name for c in cols if c.role == "id"]
        if len(ids) > 1:
            raise SchemaError(f"Schema declares {len(ids)} identifier columns {format_values(ids)}; at most one.")

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, mapping) -> Schema:
        """Build from ``{name: [modalities...]}`` (order of the mapping is the column order)."""
        return cls(tuple(Variable(str(k), tuple(v)) for k, v in mapping.items()))

    @classmethod
    def from_n_modalities(cls, n_modalities, *, prefix: str = "V") -> Schema:
        """Synthetic schema: variables ``V1..VQ`` with modalities ``"1".."K^q"`` (used by the simulator)."""
        return cls(tuple(Variable(f"{prefix}{q + 1}", tuple(str(k + 1) for k in range(int(kq))))
                         for q, kq in enumerate(n_modalities)))

    # -- properties --------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        """Variable names in column order."""
        return tuple(v.name for v in self.variables)

    def role_columns(self, *roles: str) -> tuple[str, ...]:
        """Names of the declared non-item columns with one of ``roles`` (all of them without ``roles``)."""
        return tuple(c.name for c in self.columns if not roles or c.role in roles)

    @property
    def id_column(self) -> str | None:
        """The declared row identifier column, or None."""
        return next((c.name for c in self.columns if c.role == "id"), None)

    def with_columns(self, columns) -> Schema:
        """This schema with the given non-item ``columns`` (replacing any it declared)."""
        return Schema(self.variables, na_values=self.na_values, continuous=self.continuous, columns=tuple(columns))

    @property
    def n_modalities(self) -> tuple[int, ...]:
        """Number of modalities of each variable, in column order."""
        return tuple(v.n_modalities for v in self.variables)

    @property
    def continuous_names(self) -> tuple[str, ...]:
        """Names of the continuous variables, in the model's order."""
        return tuple(v.name for v in self.continuous)

    @property
    def item_names(self) -> tuple[str, ...]:
        """Every clustering column of the schema: the categorical variables, then the continuous ones (the
        non-item columns with a role are ``columns``)."""
        return self.names + self.continuous_names

    @property
    def n_variables(self) -> int:
        """Number of variables Q."""
        return len(self.variables)

    def __len__(self) -> int:
        return len(self.variables)

    def __getitem__(self, name: str) -> Variable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    # -- JSON --------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain-JSON form: ``{"format", "version", "variables": [{"name", "modalities"}]}`` (and
        ``"na_values"`` when the schema has some)."""
        out = {"format": SCHEMA_FORMAT, "version": _SCHEMA_VERSION,
               "variables": [{"name": v.name, "modalities": list(v.modalities)} for v in self.variables]}
        if self.na_values:
            out["na_values"] = list(self.na_values)
        if self.continuous:
            out["continuous"] = [v.to_dict() for v in self.continuous]
        if self.columns:
            out["columns"] = [{"name": c.name, "role": c.role, **({"kind": c.kind} if c.kind else {})}
                              for c in self.columns]
        return out

    def fingerprint(self) -> str:
        """Stable hash of the schema: first 16 hex characters of the sha256 of its canonical JSON.

        Two silos agree on the coding exactly when their fingerprints are equal; the canonical form (sorted
        keys, no whitespace) makes the hash independent of how the JSON file was pretty-printed. The roles of
        the non-item columns (``columns``) are not part of it: they do not change the clustering's coding.
        """
        coding = {k: v for k, v in self.to_dict().items() if k != "columns"}
        canon = json.dumps(coding, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]

    def to_json(self, path=None) -> str:
        """Return the JSON text; also write it to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, path_or_text) -> Schema:
        """Load from a JSON file path or from JSON text (as written by :meth:`to_json`)."""
        source = "schema text"
        text = path_or_text
        if isinstance(path_or_text, os.PathLike) or (
                isinstance(path_or_text, str) and not path_or_text.lstrip().startswith("{")):
            source = str(path_or_text)
            try:
                text = Path(path_or_text).read_text(encoding="utf-8")
            except OSError as err:
                raise SchemaError(f"Cannot read schema file {source!r}: {err.strerror or err}.") from err
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise SchemaError(f"Schema {source!r} is not valid JSON: {err}.") from err
        if not isinstance(obj, dict) or not isinstance(obj.get("variables"), list):
            raise SchemaError(f"Schema {source!r} must be a JSON object with a 'variables' list "
                              f"(format {SCHEMA_FORMAT!r}); got {type(obj).__name__}.")
        if obj.get("format", SCHEMA_FORMAT) != SCHEMA_FORMAT:
            raise SchemaError(f"Schema {source!r} has format {obj.get('format')!r}; "
                              f"expected {SCHEMA_FORMAT!r}.")
        if int(obj.get("version", _SCHEMA_VERSION)) > _SCHEMA_VERSION:
            raise SchemaError(f"Schema {source!r} has version {obj.get('version')}; this vcmc reads up to "
                              f"version {_SCHEMA_VERSION}: upgrade vcmc.")
        variables = []
        for i, v in enumerate(obj["variables"]):
            if not isinstance(v, dict) or "name" not in v or "modalities" not in v:
                raise SchemaError(f"Schema {source!r}: variable {i + 1} needs 'name' and 'modalities'; got "
                                  f"{v!r:.80}.")
            if not isinstance(v["name"], str):
                raise SchemaError(f"Schema {source!r}: the name of variable {i + 1} must be a string; got "
                                  f"{v['name']!r}.")
            mods = v["modalities"]
            # a string is a sequence too: "123" would silently become the modalities "1", "2", "3"
            if not isinstance(mods, list):
                raise SchemaError(f"Schema {source!r}, variable {v['name']!r}: 'modalities' must be a JSON list "
                                  f"of labels, e.g. [\"1\", \"2\", \"3\"]; got {type(mods).__name__} {mods!r:.60}.")
            bad = [m for m in mods if isinstance(m, bool) or not isinstance(m, str | int)]
            if bad:
                raise SchemaError(f"Schema {source!r}, variable {v['name']!r}: every modality must be a string "
                                  f"(or a whole number); got {format_values(bad)}. Write labels exactly as they "
                                  "appear in the data files, e.g. \"1.5\" in quotes.")
            variables.append(Variable(v["name"], tuple(str(m) for m in mods)))
        na = obj.get("na_values", [])
        if not isinstance(na, list) or not all(isinstance(x, str) for x in na):
            raise SchemaError(f"Schema {source!r}: 'na_values' must be a JSON list of strings (cell texts "
                              f"meaning missing); got {na!r:.60}.")
        cont = obj.get("continuous", [])
        if not isinstance(cont, list):
            raise SchemaError(f"Schema {source!r}: 'continuous' must be a JSON list of {{name, location, scale}}; got "
                              f"{cont!r:.60}.")
        continuous = []
        for i, v in enumerate(cont):
            if not isinstance(v, dict) or not {"name", "location", "scale"} <= set(v):
                raise SchemaError(f"Schema {source!r}: continuous variable {i + 1} needs 'name', 'location' and "
                                  f"'scale'; got {v!r:.80}.")
            continuous.append(ContinuousVariable(v["name"], v["location"], v["scale"], v.get("unit", "")))
        raw_columns = obj.get("columns", [])
        if not isinstance(raw_columns, list):
            raise SchemaError(f"Schema {source!r}: 'columns' must be a JSON list of {{\"name\", \"role\"}} objects; "
                              f"got {type(raw_columns).__name__}.")
        columns = []
        for i, c in enumerate(raw_columns):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("role"), str):
                raise SchemaError(f"Schema {source!r}: column entry {i + 1} needs a 'name' and a 'role' (one of "
                                  f"{', '.join(ROLES)}); got {c!r:.80}.")
            try:
                columns.append(Column(c["name"], c["role"], c.get("kind")))
            except SchemaError as err:
                raise SchemaError(f"Schema {source!r}: {err}") from None
        try:
            return cls(tuple(variables), na_values=tuple(na), continuous=tuple(continuous),
                       columns=tuple(columns))
        except SchemaError as err:
            raise SchemaError(f"Schema {source!r}: {err}") from None

    # -- encoding ----------------------------------------------------------------------------------
    def encode(self, df: pd.DataFrame, *, source: str = "data frame", na_values=DEFAULT_NA_VALUES,
               normalisation: Normalisation = NO_NORMALISATION, changes: dict | None = None,
               quote_values: bool = True) -> np.ndarray:
        """Encode a data frame to integer codes with this schema.

        Parameters
        ----------
        df : pandas.DataFrame
            Exactly the schema's columns (any order; extra columns are an error, since nothing is dropped
            silently: remove identifier columns first, e.g. with ``read_csv(..., id_column=...)``).
        source : str
            File or description named in error messages.
        na_values : iterable of str
            Strings read as missing, besides the schema's own ``na_values``.
        normalisation : Normalisation
            Explicit normalisation of the labels (``--strip-whitespace``, ``--case-insensitive``); a cell
            matches the modality whose normalised form equals its own.
        changes : dict, optional
            Filled with ``{column: [(raw label, modality or None, cells), ...]}`` for the labels that the
            normalisation or the missing-value texts changed.
        quote_values : bool
            Quote the offending values in the error for a value outside the schema (default True, to
            help whoever fixes the file); False names the file, the column and how many values and rows
            without quoting any value.

        Returns
        -------
        numpy.ndarray of shape (n, Q), int16
            Codes ``0..K^q-1``; ``MISSING`` (-1) for missing values.

        Raises
        ------
        SchemaError
            A schema column is absent, or a column is not in the schema.
        DataError
            A value is not a modality of the schema.
        """
        import pandas as pd

        cols = [str(c) for c in df.columns]
        declared = [c for c in cols if c in set(self.role_columns())]
        if declared:       # columns the schema gives a role other than item: left out of the clustering
            df = df.drop(columns=[c for c in df.columns if str(c) in set(declared)])
            cols = [str(c) for c in df.columns]
        missing_cols = [n for n in self.names if n not in cols]
        if missing_cols:
            raise SchemaError(f"{source}: column(s) {format_values(missing_cols)} of the schema are missing; "
                              f"expected columns {format_values(self.item_names, 20)}; "
                              f"found {format_values(cols, 20)}.")
        extra = [c for c in cols if c not in self.item_names]
        if extra:
            raise SchemaError(f"{source}: column(s) {format_values(extra)} are not in the schema; "
                              "expected only "
                              f"{format_values(self.item_names, 20)}. Leave them out with --exclude "
                              f"{','.join(extra[:5])} (or declare their role in the schema: vcmc schema "
                              "--covariates/--distal/--exclude), or remove them from the file.")
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise SchemaError(f"{source}: column(s) {format_values(dup)} appear more than once.")
        frame = df.copy()
        frame.columns = cols
        na = tuple(dict.fromkeys((*(str(v) for v in (na_values or ())), *self.na_values)))
        na_keys = {normalisation.key(v) for v in na}
        out = np.empty((len(frame), self.n_variables), dtype=_CODE_DTYPE)
        for q, var in enumerate(self.variables):
            keys = [normalisation.key(m) for m in var.modalities]
            clash = sorted({m for m, k in zip(var.modalities, keys, strict=True) if keys.count(k) > 1})
            if clash:
                raise SchemaError(f"{source}, column {var.name!r}: the schema's modalities {format_values(clash)} "
                                  f"become one label under {_describe_normalisation(normalisation)}; the schema "
                                  "tells them apart, so the option cannot be used with it.")
            both = [m for m, k in zip(var.modalities, keys, strict=True) if k in na_keys]
            if both:
                raise SchemaError(f"{source}, column {var.name!r}: {format_values(both)} is a modality of the schema "
                                  f"and also a missing-value text (na_values {format_values(na)}); a cell cannot be "
                                  "both. Drop it from --na-values, or from the schema's modalities.")
            column_changes = [] if changes is not None else None
            idx, labels = factorize_labels(frame[var.name], na, normalisation=normalisation,
                                           changes=column_changes)
            pos = {k: i for i, k in enumerate(keys)}
            # schema code of each distinct label; -2 marks a label outside the schema, -1 stays missing
            table = np.array([pos.get(lab, -2) for lab in labels] + [MISSING], dtype=np.int64)
            codes = table[idx]
            unknown = codes == -2
            if unknown.any():
                rows = np.flatnonzero(unknown)
                bad = pd.unique(np.asarray(labels, dtype=object)[idx[rows]])
                if not quote_values:
                    raise DataError(
                        f"{source}, column {var.name!r}: {len(bad)} distinct value(s) in {rows.size} row(s) "
                        f"are not among the {var.n_modalities} modalities of the schema (values not quoted); "
                        "every value must be a modality of the schema or missing.")
                known = int(np.count_nonzero(codes >= 0))
                fix = ("This file codes the column with none of the schema's values: another coding of the same "
                       "answers (1/2 for no/yes?); recode the file to the schema's values, do not add them to the "
                       "schema (they would become separate modalities)." if known == 0 else
                       "Add them to the shared schema if they are valid.")
                raise DataError(
                    f"{source}, column {var.name!r}: value(s) {format_values(bad)} (data row(s) "
                    f"{format_values(rows.tolist())}, 0-based) are not modalities of the schema; "
                    "expected one of "
                    f"{format_values(var.modalities, 20)} or a missing value. "
                    + _unknown_value_hint(bad, var.modalities, normalisation) + fix)
            if changes is not None and column_changes:
                modality = {k: m for k, m in zip(keys, var.modalities, strict=True)}
                changes[var.name] = [(raw, None if lab is None else modality.get(lab, lab), n)
                                     for raw, lab, n in column_changes]
            out[:, q] = codes
        return np.ascontiguousarray(out)

    def encode_values(self, df: pd.DataFrame, *, source: str = "data frame", na_values=DEFAULT_NA_VALUES
                      ) -> np.ndarray | None:
        """The continuous columns of a data frame as float64 (n, G), ``NaN`` where missing; None for a schema
        without continuous variables (errors: ``vcmc.data.continuous.numeric_column``)."""
        if not self.continuous:
            return None
        from vcmc.data.continuous import numeric_column

        frame = df.set_axis([str(c) for c in df.columns], axis=1)
        na = tuple(dict.fromkeys((*(str(v) for v in (na_values or ())), *self.na_values)))
        out = np.empty((len(frame), len(self.continuous)))
        for g, var in enumerate(self.continuous):
            out[:, g] = numeric_column(frame[var.name], na, source=source, name=var.name)
        return out

    def decode(self, codes: np.ndarray) -> pd.DataFrame:
        """Labels from codes: a data frame with the schema's columns, ``None`` where the code is MISSING."""
        import pandas as pd

        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != self.n_variables:
            raise DataError(f"codes must have shape (n, {self.n_variables}); got {codes.shape}.")
        data = {}
        for q, var in enumerate(self.variables):
            c = codes[:, q]
            if c.size and (c.min() < MISSING or c.max() >= var.n_modalities):
                raise DataError(f"codes of variable {var.name!r} must lie in [-1, {var.n_modalities - 1}]; "
                                f"got values in [{c.min()}, {c.max()}].")
            data[var.name] = pd.Categorical.from_codes(c.astype(np.int64), categories=list(var.modalities))
        return pd.DataFrame(data).astype(object).where(lambda f: f.notna(), None)


@dataclass(frozen=True, eq=False)
class SiloData:
    """One silo's data, encoded with the shared schema. Stays inside the silo.

    Parameters
    ----------
    name : str
        Silo name, e.g. ``"silo_1"`` (file stem by default).
    codes : numpy.ndarray of shape (n, Q)
        Integer codes ``0..K^q-1``, ``-1`` = missing; stored as C-contiguous int16.
    schema : Schema
        The shared schema the codes refer to.
    source : str or None
        File path or description used in error messages.
    row_ids : numpy.ndarray of shape (n,) or None
        Identifiers of the rows (from an ``id_column``), kept inside the silo; ``None`` means the 0-based
        row index.
    values : numpy.ndarray of shape (n, G) or None
        The continuous variables in the file's units, ``NaN`` = missing (float64); None when the schema has
        none.
    """

    name: str
    codes: np.ndarray
    schema: Schema
    source: str | None = None
    row_ids: np.ndarray | None = field(default=None, repr=False)
    values: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        where = f"silo {self.name!r}" + (f" ({self.source})" if self.source else "")
        if not isinstance(self.schema, Schema):
            raise SchemaError(f"{where}: schema must be a vcmc.data.Schema; "
                              f"got {type(self.schema).__name__}.")
        codes = np.asarray(self.codes)
        if codes.ndim != 2 or codes.shape[1] != self.schema.n_variables:
            raise DataError(f"{where}: codes must have shape (n, {self.schema.n_variables}) to match the "
                            f"schema; got {codes.shape}.")
        if codes.size and not np.issubdtype(codes.dtype, np.integer):
            raise DataError(f"{where}: codes must be integers; got dtype {codes.dtype}.")
        if codes.size:
            k = np.asarray(self.schema.n_modalities)
            bad = (codes < MISSING) | (codes >= k[None, :])
            if bad.any():
                q = int(np.flatnonzero(bad.any(axis=0))[0])
                raise DataError(f"{where}: codes of variable {self.schema.names[q]!r} must lie in "
                                f"[-1, {k[q] - 1}]; found values outside that range.")
        object.__setattr__(self, "codes", np.ascontiguousarray(codes, dtype=_CODE_DTYPE))
        n_cont = len(self.schema.continuous)
        if n_cont or self.values is not None:
            values = None if self.values is None else np.asarray(self.values, dtype=np.float64)
            if values is None or values.shape != (codes.shape[0], n_cont):
                raise DataError(f"{where}: values must have shape ({codes.shape[0]}, {n_cont}) to match the "
                                f"schema's continuous variables; got {None if values is None else values.shape}.")
            if np.isinf(values).any():
                raise DataError(f"{where}: values must be finite or NaN (missing); found infinities.")
            object.__setattr__(self, "values", np.ascontiguousarray(values))
        if self.row_ids is not None:
            ids = np.asarray(self.row_ids)
            if ids.shape != (codes.shape[0],):
                raise DataError(f"{where}: row_ids must have shape ({codes.shape[0]},); got {ids.shape}.")
            object.__setattr__(self, "row_ids", ids)

    @property
    def n_rows(self) -> int:
        """Number of individuals n_s."""
        return int(self.codes.shape[0])

    @property
    def n_modalities(self) -> tuple[int, ...]:
        """Number of modalities of each variable (from the schema)."""
        return self.schema.n_modalities

    @property
    def missing_rate(self) -> float:
        """Fraction of missing cells."""
        return float(np.mean(self.codes == MISSING)) if self.codes.size else 0.0

    def to_frame(self) -> pd.DataFrame:
        """Labels as a data frame (missing as ``None``; continuous columns in their units, missing as NaN), index =
        row ids when known."""
        import pandas as pd

        df = self.schema.decode(self.codes)
        for g, name in enumerate(self.schema.continuous_names):
            df[name] = self.values[:, g]
        if self.row_ids is not None:
            df.index = pd.Index(self.row_ids, name="id")
        return df
