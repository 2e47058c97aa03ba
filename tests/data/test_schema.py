"""Tests of vcmc.data.schema: Variable, Schema (JSON, fingerprint, encode/decode), SiloData."""

import json

import numpy as np
import pandas as pd
import pytest

from vcmc.data import Schema, SiloData, Variable
from vcmc.data.schema import sort_modalities
from vcmc.exceptions import DataError, SchemaError
from vcmc.model import MISSING

SCHEMA = Schema((Variable("sex", ("F", "M")), Variable("stage", ("1", "2", "10"))))


def test_properties():
    assert SCHEMA.names == ("sex", "stage")
    assert SCHEMA.n_modalities == (2, 3)
    assert SCHEMA["stage"].modalities == ("1", "2", "10")
    assert len(SCHEMA) == 2


def test_sort_modalities_numeric_aware():
    assert sort_modalities(["10", "2", "1"]) == ("1", "2", "10")
    assert sort_modalities(["b", "10", "a"]) == ("10", "a", "b")
    assert sort_modalities(["0.5", "-1", "3"]) == ("-1", "0.5", "3")


def test_json_round_trip_and_fingerprint(tmp_path):
    path = tmp_path / "schema.json"
    text = SCHEMA.to_json(path)
    assert json.loads(text)["variables"][1] == {"name": "stage", "modalities": ["1", "2", "10"]}
    back = Schema.from_json(path)
    assert back == SCHEMA
    assert Schema.from_json(text) == SCHEMA
    # The fingerprint ignores formatting and changes with any modality or its order.
    compact = json.dumps(json.loads(text))
    assert Schema.from_json(compact).fingerprint() == SCHEMA.fingerprint()
    assert len(SCHEMA.fingerprint()) == 16
    other = Schema((Variable("sex", ("M", "F")), Variable("stage", ("1", "2", "10"))))
    assert other.fingerprint() != SCHEMA.fingerprint()


def test_from_json_errors(tmp_path):
    with pytest.raises(SchemaError, match=r"Cannot read schema file .*nope\.json"):
        Schema.from_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match=r"bad\.json' is not valid JSON"):
        Schema.from_json(bad)
    with pytest.raises(SchemaError, match=r"'variables' list"):
        Schema.from_json('{"format": "vcmc-schema"}')
    with pytest.raises(SchemaError, match=r"format 'other'; expected 'vcmc-schema'"):
        Schema.from_json('{"format": "other", "variables": []}')
    with pytest.raises(SchemaError, match=r"needs 'name' and 'modalities'"):
        Schema.from_json('{"variables": [{"name": "a"}]}')


def test_variable_errors():
    with pytest.raises(SchemaError, match=r"Variable 'x' has 1 modality \('a'\); expected at least 2"):
        Variable("x", ("a",))
    with pytest.raises(SchemaError, match=r"Variable 'x' lists modalities more than once: 'a'"):
        Variable("x", ("a", "b", "a"))
    with pytest.raises(SchemaError, match=r"non-empty string"):
        Variable("", ("a", "b"))
    with pytest.raises(SchemaError, match=r"duplicated variable names 'x'"):
        Schema((Variable("x", ("a", "b")), Variable("x", ("c", "d"))))
    with pytest.raises(SchemaError, match=r"at least one variable"):
        Schema(())


def test_encode_with_missing_and_numbers_read_as_float():
    # stage read by pandas as float because of a NaN: 2.0 must code as "2", not be rejected or recoded.
    df = pd.DataFrame({"stage": [1.0, np.nan, 10.0, 2.0], "sex": ["M", "F", None, "NA"]})
    codes = SCHEMA.encode(df, source="t.csv", na_values=("", "NA"))
    np.testing.assert_array_equal(codes, [[1, 0], [0, MISSING], [MISSING, 2], [MISSING, 1]])
    assert codes.dtype == np.int16 and codes.flags.c_contiguous
    back = SCHEMA.decode(codes)
    assert back["sex"].tolist() == ["M", "F", None, None]
    assert back["stage"].tolist() == ["1", None, "10", "2"]


def test_encode_errors_name_file_column_value():
    df = pd.DataFrame({"sex": ["F", "X", "M"], "stage": ["1", "2", "3"]})
    with pytest.raises(DataError, match=r"h\.csv, column 'sex': value\(s\) 'X' \(data row\(s\) 1, "
                                        r"0-based\) are not modalities of the schema; "
                                        r"expected one of 'F', 'M'"):
        SCHEMA.encode(df, source="h.csv")
    with pytest.raises(SchemaError, match=r"h\.csv: column\(s\) 'stage' of the schema are missing"):
        SCHEMA.encode(df[["sex"]], source="h.csv")
    with pytest.raises(SchemaError, match=r"h\.csv: column\(s\) 'age' are not in the schema"):
        SCHEMA.encode(df.assign(age=["1", "2", "3"]), source="h.csv")


def test_silodata_checks_and_contiguity():
    codes = np.array([[0, 2], [1, -1]], dtype=np.int64)
    s = SiloData("a", codes, SCHEMA)
    assert s.codes.dtype == np.int16 and s.codes.flags.c_contiguous
    assert s.n_rows == 2 and s.n_modalities == (2, 3)
    assert s.missing_rate == pytest.approx(0.25)
    assert s.to_frame()["stage"].tolist() == ["10", None]
    with pytest.raises(DataError, match=r"silo 'a'.*shape \(n, 2\).*got \(2, 3\)"):
        SiloData("a", np.zeros((2, 3), dtype=int), SCHEMA)
    with pytest.raises(DataError, match=r"variable 'stage' must lie in \[-1, 2\]"):
        SiloData("a", np.array([[0, 3]]), SCHEMA)
    with pytest.raises(DataError, match=r"must be integers"):
        SiloData("a", np.array([[0.0, 1.0]]), SCHEMA)
    with pytest.raises(DataError, match=r"row_ids must have shape \(2,\)"):
        SiloData("a", codes, SCHEMA, row_ids=np.arange(3))


def test_from_n_modalities():
    s = Schema.from_n_modalities([2, 3])
    assert s.names == ("V1", "V2") and s.variables[1].modalities == ("1", "2", "3")
