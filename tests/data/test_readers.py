"""Tests of vcmc.data.readers: CSV/DataFrame/Parquet reading, schema inference, splitting, bad input."""


import numpy as np
import pandas as pd
import pytest

from vcmc.data import (
    Schema,
    Variable,
    from_dataframe,
    infer_schema,
    read_csv,
    read_parquet,
    read_silos,
    split_by_column,
)
from vcmc.exceptions import DataError, SchemaError
from vcmc.model import MISSING
from vcmc.research.datasets import ability_path

ABILITY = ability_path()


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def two_silos(tmp_path):
    a = _write(tmp_path, "h1.csv", "smoker,stage\nyes,1\nno,2\nyes,\nno,10\n")
    b = _write(tmp_path, "h2.csv", "smoker,stage\nno,3\n,1\nno,2\n")
    return a, b


def test_read_csv_infers_schema_keeps_missing_rows(two_silos):
    silo = read_csv(two_silos[0])
    assert silo.name == "h1" and silo.source == str(two_silos[0])
    assert silo.schema.names == ("smoker", "stage")
    assert silo.schema["stage"].modalities == ("1", "2", "10")  # numeric order, not "1" < "10" < "2"
    np.testing.assert_array_equal(silo.codes, [[1, 0], [0, 1], [1, MISSING], [0, 2]])


def test_shared_schema_union_across_silos_and_json(two_silos, tmp_path):
    schema = infer_schema(list(two_silos))
    assert schema["stage"].modalities == ("1", "2", "3", "10")
    schema.to_json(tmp_path / "schema.json")
    # silo 1 lacks modality "3" but still uses the shared coding
    s1 = read_csv(two_silos[0], schema=tmp_path / "schema.json")
    s2 = read_csv(two_silos[1], schema=schema)
    np.testing.assert_array_equal(s1.codes[:, 1], [0, 1, MISSING, 3])
    np.testing.assert_array_equal(s2.codes, [[0, 2], [MISSING, 0], [0, 1]])
    silos = read_silos(list(two_silos))
    assert [s.name for s in silos] == ["h1", "h2"]
    assert silos[0].schema.fingerprint() == schema.fingerprint()
    np.testing.assert_array_equal(silos[1].codes, s2.codes)


def test_read_ability_with_id_column():
    raw = pd.read_csv(ABILITY)
    n_na = int(raw["reason.4"].isna().sum())            # pandas' own reading of the "NA" cells
    with pytest.raises(SchemaError, match=rf"'NA' in column\(s\) 'reason\.4' \({n_na} rows, in .*ability\.csv\).* "
                                          r"is a common spelling of a missing value; say which it is: --na-values NA"):
        read_csv(ABILITY, id_column=0)
    silo = read_csv(ABILITY, id_column=0, na_values=("", "NA"))
    assert silo.n_rows == len(raw) == 1525
    assert silo.schema.names == tuple(raw.columns[1:])
    assert silo.schema.n_modalities == (2,) * 16
    assert all(v.modalities == ("0", "1") for v in silo.schema.variables)
    # "NA" cells are missing, in the same rows as pandas' own NA parsing; no row dropped.
    np.testing.assert_array_equal(silo.codes == MISSING, raw.iloc[:, 1:].isna().to_numpy())
    obs = ~raw.iloc[:, 1:].isna().to_numpy()
    np.testing.assert_array_equal(silo.codes[obs], raw.iloc[:, 1:].to_numpy()[obs].astype(int))
    np.testing.assert_array_equal(silo.row_ids.astype(int), raw.iloc[:, 0].to_numpy())
    # the unnamed first column can also be named by its (empty) header
    assert read_csv(ABILITY, id_column="", na_values=("", "NA")).schema == silo.schema


def test_from_dataframe_numeric_and_categorical_columns():
    df = pd.DataFrame({"a": [0, 1, 1, 0], "b": pd.Categorical(["x", "y", None, "x"]),
                       "c": [True, False, True, True]})
    silo = from_dataframe(df, name="s")
    assert silo.schema["c"].modalities == ("False", "True")
    np.testing.assert_array_equal(silo.codes, [[0, 0, 1], [1, 1, 0], [1, MISSING, 1], [0, 0, 1]])
    # a frame holding the row ids
    silo = from_dataframe(df.assign(pid=[10, 11, 12, 13]), name="s", id_column="pid")
    np.testing.assert_array_equal(silo.row_ids, [10, 11, 12, 13])


def test_split_by_column(tmp_path):
    p = _write(tmp_path, "pooled.csv", "site,a,b\n2,x,1\n1,y,2\n2,y,\n1,x,1\n10,x,2\n10,y,1\n")
    silos = split_by_column(p, "site")
    assert [s.name for s in silos] == ["1", "2", "10"]
    assert silos[0].schema.names == ("a", "b")
    np.testing.assert_array_equal(silos[1].row_ids, [0, 2])
    np.testing.assert_array_equal(silos[1].codes, [[0, 0], [1, MISSING]])
    assert "site=2" in silos[1].source
    with pytest.raises(DataError, match=r"silo column 'hospital' is not a column"):
        split_by_column(p, "hospital")
    q = _write(tmp_path, "nosite.csv", "site,a\n1,x\n,y\n1,y\n")
    with pytest.raises(DataError, match=r"nosite\.csv, column 'site': rows 1 \(0-based\) have no silo"):
        split_by_column(q, "site")


def test_parquet_round_trip(tmp_path, two_silos):
    pytest.importorskip("pyarrow")
    df = pd.read_csv(two_silos[0], dtype=str, keep_default_na=False)
    path = tmp_path / "h1.parquet"
    df.to_parquet(path)
    assert read_parquet(path).codes.tolist() == read_csv(two_silos[0]).codes.tolist()


# ---- bad input: each error names the file, the column and the value, and says what was expected ----------
def test_unreadable_files(tmp_path):
    with pytest.raises(DataError, match=r"cannot read file '.*absent\.csv': it does not exist; expected"):
        read_csv(tmp_path / "absent.csv")
    with pytest.raises(DataError, match=r"is a directory"):
        read_csv(tmp_path)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"a,b\n\xff\xfe,\x80\n")
    with pytest.raises(DataError, match=r"bin\.csv': not utf-8 text"):
        read_csv(binary)
    ragged = _write(tmp_path, "ragged.csv", "a,b\n1,2\n1,2,3,4\n")
    with pytest.raises(DataError, match=r"ragged\.csv, line 3: 4 fields, expected 2 as in the header"):
        read_csv(ragged)


def test_empty_file_and_header_only(tmp_path):
    with pytest.raises(DataError, match=r"file '.*empty\.csv' is empty; expected a header row"):
        read_csv(_write(tmp_path, "empty.csv", ""))
    with pytest.raises(DataError, match=r"file '.*blank\.csv' is empty"):
        read_csv(_write(tmp_path, "blank.csv", "\n\n"))
    with pytest.raises(DataError, match=r"head\.csv: has 0 data row\(s\) \(n_samples = 0\); expected at least 2"):
        read_csv(_write(tmp_path, "head.csv", "a,b\n"))


def test_silo_with_fewer_than_two_rows(tmp_path):
    schema = Schema((Variable("a", ("x", "y")),))
    with pytest.raises(DataError,
                       match=r"one\.csv: has 1 data row\(s\) \(n_samples = 1\); expected at least 2 individuals"):
        read_csv(_write(tmp_path, "one.csv", "a\nx\n"), schema=schema)


def test_column_missing_from_one_silo(tmp_path, two_silos):
    c = _write(tmp_path, "h3.csv", "smoker\nyes\nno\n")
    with pytest.raises(SchemaError, match=r"h3\.csv: column\(s\) 'stage' are missing "
                                          r"\(present in .*h1\.csv\)"):
        infer_schema([two_silos[0], c])
    with pytest.raises(SchemaError, match=r"h3\.csv: column\(s\) 'stage' of the schema are missing"):
        read_csv(c, schema=infer_schema(two_silos[0]))
    d = _write(tmp_path, "h4.csv", "smoker,stage,age\nyes,1,34\nno,2,50\n")
    with pytest.raises(SchemaError, match=r"h4\.csv: column\(s\) 'age' are not in .*h1\.csv"):
        infer_schema([two_silos[0], d])


def test_unknown_modality(tmp_path, two_silos):
    schema = infer_schema(list(two_silos))
    bad = _write(tmp_path, "h5.csv", "smoker,stage\nyes,1\nmaybe,2\nno,4\n")
    with pytest.raises(DataError, match=r"h5\.csv, column 'smoker': value\(s\) 'maybe' \(data row\(s\) 1, "
                                        r"0-based\) are not modalities of the schema; expected one of 'no', "
                                        r"'yes' or a missing value"):
        read_csv(bad, schema=schema)


def test_single_modality(tmp_path):
    a = _write(tmp_path, "s1.csv", "sex,smoker\nF,yes\nF,no\n")
    b = _write(tmp_path, "s2.csv", "sex,smoker\nF,no\n,no\n")
    with pytest.raises(SchemaError, match=r"column 'sex' has a single modality 'F' in every silo "
                                          r"\(.*s1\.csv, .*s2\.csv\); expected at least 2 modalities"):
        infer_schema([a, b])


def test_all_values_missing_in_a_column(tmp_path):
    schema = Schema((Variable("a", ("x", "y")), Variable("b", ("1", "2"))))
    p = _write(tmp_path, "m.csv", "a,b\nx,NA\ny,\nx,NA\n")
    with pytest.raises(DataError, match=r"m\.csv: column\(s\) 'b' have all 3 values missing; "
                                        r"expected at least one observed value"):
        read_csv(p, schema=schema, na_values=("", "NA"))
    with pytest.raises(DataError, match=r"column 'b' has all values missing in every silo \(.*m\.csv\)"):
        infer_schema(p, na_values=("", "NA"))


def test_free_text_column(tmp_path):
    rng = np.random.default_rng(0)
    notes = [f"note {i} {rng.integers(1e9)}" for i in range(3000)]
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 3000), "notes": notes})
    path = tmp_path / "free.csv"
    df.to_csv(path, index=False)
    with pytest.raises(SchemaError, match=r"free\.csv, column 'notes': 3000 distinct values in 3000 rows "
                                          r"\(e\.g\. 'note 0 .*every value is distinct: it looks like a row "
                                          r"identifier"):
        read_csv(path)
    # a repeated free text is not an identifier, but still more values than a categorical variable has
    repeated = df.copy()
    repeated.loc[::2, "notes"] = "same"
    repeated.loc[1::4, "notes"] = "other"
    with pytest.raises(SchemaError, match=r"column 'notes': 752 distinct values .*at most max_levels=50"):
        infer_schema(repeated)
    # raising the limit is explicit
    assert infer_schema(df.iloc[:60], max_levels=100, many_levels=None)["notes"].n_modalities == 60


def test_duplicate_row_ids(tmp_path):
    p = _write(tmp_path, "dup.csv", "id,a\n1,x\n1,y\n2,x\n")
    with pytest.raises(DataError, match=r"dup\.csv, column 'id': row identifiers '1' appear more than once"):
        read_csv(p, id_column="id")
    with pytest.raises(SchemaError, match=r"id_column 'pid' is not a column"):
        read_csv(p, id_column="pid")


def test_nothing_silently_dropped_extra_column(tmp_path, two_silos):
    schema = infer_schema(two_silos[0])
    p = _write(tmp_path, "extra.csv", "smoker,stage,id\nyes,1,a\nno,2,b\n")
    with pytest.raises(SchemaError, match=r"extra\.csv: column\(s\) 'id' are not in the schema"):
        read_csv(p, schema=schema)
    assert read_csv(p, schema=schema, id_column="id").n_rows == 2


def test_mixed_types_code_consistently_and_input_not_mutated():
    df = pd.DataFrame({"a": pd.Series([1, "1", 1.0, "2", None], dtype=object),
                       "b": [0.5, 2.0, np.nan, 0.5, 2.0]})
    before = df.copy()
    silo = from_dataframe(df)
    assert silo.schema["a"].modalities == ("1", "2")
    assert silo.schema["b"].modalities == ("0.5", "2")
    np.testing.assert_array_equal(silo.codes, [[0, 0], [0, 1], [0, MISSING], [1, 0], [MISSING, 1]])
    pd.testing.assert_frame_equal(df, before)


def test_simulated_files_read_back_exactly(tmp_path):
    from vcmc.research.simulate import simulate_design

    d = simulate_design("non-nested", "easy", rng=2, n_per_silo=50, missing_rate=0.1)
    d.write(tmp_path)
    silos = read_silos(sorted(tmp_path.glob("silo_*.csv")), schema=tmp_path / "schema.json")
    assert [s.name for s in silos] == ["silo_1", "silo_2", "silo_3", "silo_4"]
    for got, want in zip(silos, d.silos, strict=True):
        np.testing.assert_array_equal(got.codes, want.codes)
        assert got.schema == d.schema


def test_csv_cells_are_read_verbatim_as_text(tmp_path):
    # "01", "1" and "1.0" are three modalities; "None", "NA" and " yes" (leading space) are labels, not
    # missing; only the empty cell is missing, and identifiers keep their leading zeros.
    p = _write(tmp_path, "t.csv", "id,code,answer\n007,01,None\n008,1, yes\n009,1.0,NA\n010,01,yes\n011,1,\n")
    schema = Schema((Variable("code", ("01", "1", "1.0")), Variable("answer", ("None", " yes", "yes", "NA"))))
    silo = read_csv(p, id_column="id", schema=schema)
    assert silo.row_ids.tolist() == ["007", "008", "009", "010", "011"]
    assert all(type(i) is str for i in silo.row_ids)
    np.testing.assert_array_equal(silo.codes, [[0, 0], [1, 1], [2, 3], [0, 2], [1, MISSING]])
    # inference does not guess: " yes" beside "yes" is refused, with the column, the values and the fix
    with pytest.raises(SchemaError, match=r"column 'answer': ' yes', 'yes' differ only by white space .* "
                                          r"--strip-whitespace"):
        read_csv(p, id_column="id")
