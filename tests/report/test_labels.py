"""``--labels FILE``: cluster names from CSV or JSON, and the errors a wrong file gets."""

import json

import pytest

from vcmc.exceptions import DataError
from vcmc.report.labels import read_labels


def test_csv_and_json_give_the_same_names(tmp_path):
    csv = tmp_path / "names.csv"
    csv.write_text("cluster,label\n1,Low burden\n2, Cardiac \n3,Dementia\n")
    js = tmp_path / "names.json"
    js.write_text(json.dumps({"1": "Low burden", "2": "Cardiac", "3": "Dementia"}))
    want = {1: "Low burden", 2: "Cardiac", 3: "Dementia"}
    assert read_labels(csv, [1, 2, 3]) == want
    assert read_labels(js, [1, 2, 3]) == want


def test_an_empty_cluster_may_stay_unnamed(tmp_path):
    csv = tmp_path / "names.csv"
    csv.write_text("cluster,label\n1,A\n2,B\n")
    assert read_labels(csv, [1, 2, 3], required=[1, 2]) == {1: "A", 2: "B"}


@pytest.mark.parametrize(("text", "needle"), [
    ("cluster,label\n1,A\n2,B\n9,C\n", "cluster 9 is not a cluster of this fit"),
    ("cluster,label\n1,A\n2,B\n2,C\n3,D\n", "cluster 2 is named twice"),
    ("cluster,label\n1,A\n2,A\n3,B\n", "clusters 1, 2 have the same name 'A'"),
    ("cluster,label\n1,A\n", "no name for cluster(s) 2-3"),
    ("cluster,label\n1,A\n2,\n3,C\n", "cluster 2 has an empty name"),
    ("cluster,label\none,A\n", "cluster 'one' is not a cluster number"),
    ("id,name\n1,A\n", "expected a header row 'cluster,label'"),
])
def test_wrong_csv_files_are_clear_errors_naming_the_file(tmp_path, text, needle):
    path = tmp_path / "my-names.csv"
    path.write_text(text)
    with pytest.raises(DataError) as exc:
        read_labels(path, [1, 2, 3])
    assert needle in str(exc.value)
    assert "my-names.csv" in str(exc.value)


@pytest.mark.parametrize(("data", "needle"), [
    ({"1": "A", "2": "B", "4": "D", "3": "C"}, "cluster 4 is not a cluster of this fit"),
    ({"1": "A", "2": 5, "3": "C"}, "expected a name (a string)"),
    (["A", "B", "C"], "expected a JSON object"),
    ({"1": "A", "2": "a", "3": "C"}, "have the same name"),            # names differ only in case
])
def test_wrong_json_files_are_clear_errors_naming_the_file(tmp_path, data, needle):
    path = tmp_path / "my-names.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as exc:
        read_labels(path, [1, 2, 3])
    assert needle in str(exc.value)
    assert "my-names.json" in str(exc.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="nope.csv: not found"):
        read_labels(tmp_path / "nope.csv", [1])
