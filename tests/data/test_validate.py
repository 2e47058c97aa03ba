"""Tests of vcmc.data.validate: mismatched schemas between silos and per-silo checks."""

import numpy as np
import pytest

from vcmc.data import Schema, SiloData, Variable, check_same_schema, validate_silo
from vcmc.exceptions import DataError, SchemaError

A = Schema((Variable("sex", ("F", "M")), Variable("stage", ("1", "2"))))


def test_same_schema_passes():
    s1 = SiloData("h1", np.zeros((3, 2), dtype=int), A, source="h1.csv")
    s2 = SiloData("h2", np.ones((2, 2), dtype=int), Schema.from_json(A.to_json()), source="h2.csv")
    assert check_same_schema([s1, s2]) == A


@pytest.mark.parametrize(("other", "match"), [
    (Schema((Variable("sex", ("F", "M")), Variable("stage", ("1", "3")))),
     r"column 'stage' has modalities '1', '2' in the first and '1', '3' in the second"),
    (Schema((Variable("sex", ("F", "M")), Variable("grade", ("1", "2")))),
     r"variables only in the first: 'stage'; only in the second: 'grade'"),
    (Schema((Variable("stage", ("1", "2")), Variable("sex", ("F", "M")))), r"in a different order"),
])
def test_mismatched_schemas_between_silos(other, match):
    s1 = SiloData("h1", np.zeros((3, 2), dtype=int), A, source="h1.csv")
    s2 = SiloData("h2", np.zeros((3, 2), dtype=int), other, source="h2.csv")
    with pytest.raises(SchemaError, match=r"silos 'h1' \(h1\.csv\) and 'h2' \(h2\.csv\) use "
                                          r"different schemas .*" + match):
        check_same_schema([s1, s2])


def test_duplicate_silo_names():
    s = SiloData("h1", np.zeros((3, 2), dtype=int), A)
    with pytest.raises(DataError, match=r"silo names must be distinct; got 'h1'"):
        check_same_schema([s, s])


def test_validate_silo():
    with pytest.raises(DataError, match=r"silo 'x': has 1 data row"):
        validate_silo(SiloData("x", np.zeros((1, 2), dtype=int), A))
    with pytest.raises(DataError, match=r"x\.csv: column\(s\) 'sex' have all 2 values missing"):
        validate_silo(SiloData("x", np.array([[-1, 0], [-1, 1]]), A, source="x.csv"))
    ok = SiloData("x", np.array([[0, -1], [1, 1]]), A)
    assert validate_silo(ok) is ok
