"""Continuous columns in the schema and the input (issue 45, item 4; docs/design.md §17.2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from vcmc.data import Schema, from_dataframe, infer_schema, read_silos
from vcmc.data.continuous import round_significant
from vcmc.exceptions import DataError, SchemaError


def _frame(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.normal(50, 12, n).round(1)
    age[3] = np.nan
    return pd.DataFrame({"smoker": rng.choice(["yes", "no"], n), "visits": rng.integers(0, 4, n),
                         "age": age, "sbp": rng.normal(130, 15, n).round(0)})


def test_auto_proposes_numeric_columns_with_many_values_and_categorical_overrides():
    frames = [_frame(1), _frame(2)]
    proposed: list[str] = []
    schema = infer_schema(frames, continuous="auto", proposed=proposed)
    assert proposed == ["age", "sbp"] and schema.continuous_names == ("age", "sbp")
    assert schema.names == ("smoker", "visits")              # few distinct numbers stay categorical
    age = schema.continuous[0]
    pooled = pd.concat(frames)["age"]
    assert age.location == round_significant(pooled.mean()) and age.scale == round_significant(pooled.std(ddof=0))
    with pytest.raises(SchemaError, match=r"column 'sbp'.*Declare it continuous \(vcmc schema --continuous sbp\)"):
        infer_schema(frames, continuous="auto", categorical=["sbp"])      # kept categorical: refused as before
    rounded = [f.assign(sbp=(f["sbp"] // 20) * 20) for f in frames]
    kept = infer_schema(rounded, continuous="auto", categorical=["sbp"])
    assert kept.continuous_names == ("age",) and "sbp" in kept.names
    assert infer_schema([f.drop(columns="sbp") for f in frames], continuous=["age"]).continuous_names == ("age",)
    # the default is unchanged: every column categorical (here the many-valued ones are refused, as before)
    with pytest.raises(SchemaError):
        infer_schema(frames)


def test_schema_json_round_trip_and_categorical_fingerprint_unchanged():
    schema = infer_schema([_frame(1)], continuous="auto")
    again = Schema.from_json(schema.to_json())
    assert again == schema and again.fingerprint() == schema.fingerprint()
    categorical = Schema(schema.variables)
    assert "continuous" not in json.loads(categorical.to_json())
    assert categorical.fingerprint() != schema.fingerprint()


def test_values_are_read_in_their_units_with_missing_as_nan():
    df = _frame(1)
    schema = infer_schema([df], continuous="auto")
    silo = from_dataframe(df, schema=schema, name="a")
    assert silo.values.shape == (60, 2) and np.isnan(silo.values[3, 0])
    assert np.allclose(silo.values[:, 1], df["sbp"])


def test_clear_errors_for_text_infinity_and_a_constant_column(tmp_path):
    df = _frame(1)
    schema = infer_schema([df], continuous="auto")
    bad = df.astype({"age": object})
    bad.loc[5, "age"] = "52 years"
    path = tmp_path / "site1.csv"
    bad.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"site1.csv, column 'age' is continuous but 1 cell\(s\) are not numbers "
                                        r"\(data row\(s\) 5") as err:
        read_silos([path], schema=schema)
    assert "52 years" not in str(err.value)
    inf = df.copy()
    inf.loc[7, "sbp"] = np.inf
    with pytest.raises(DataError, match=r"column 'sbp': 1 infinite value"):
        from_dataframe(inf, schema=schema, name="b")
    const = df.assign(sbp=120.0)
    with pytest.raises(SchemaError, match="column 'sbp' is continuous and constant"):
        infer_schema([const], continuous=["age", "sbp"])
    with pytest.raises(SchemaError, match="continuous column.*'weight'"):
        infer_schema([df], continuous=["weight"])
