"""``benchmarks/same_outputs.py``: two result folders agree apart from timings, and any other change is named."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "same_outputs.py"


@pytest.fixture(scope="module")
def same_outputs():
    spec = importlib.util.spec_from_file_location("same_outputs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(root: Path, seconds: float, weight: float = 0.3) -> Path:
    (root / "result").mkdir(parents=True)
    (root / "result" / "assignments.csv").write_text("row,cluster\n0,1\n")
    result = {"method": "vcmc", "weights": [weight, 1 - weight], "timings_s": {"apply": seconds},
              "silos": [{"name": "a", "seconds_sampler": seconds, "process_peak_rss_mb": seconds * 10}]}
    (root / "result" / "result.json").write_text(json.dumps(result))
    (root / "result" / "report.html").write_text(
        f"<dd>{root / 'result'}</dd><h3>Timings (s)</h3><table><thead><tr><th>apply</th></tr></thead>"
        f"<tr><td>{seconds:.3f}</td></tr></table><p>6 clusters</p>")
    return root


def test_folders_differing_only_in_timings_agree(tmp_path, same_outputs):
    assert same_outputs.compare(_folder(tmp_path / "a", 1.5), _folder(tmp_path / "b", 27.25)) == []


def test_a_changed_result_is_named(tmp_path, same_outputs):
    a, b = _folder(tmp_path / "a", 1.5), _folder(tmp_path / "b", 1.5, weight=0.31)
    assert same_outputs.compare(a, b) == ["result/result.json: differs at weights.0, weights.1"]
    (b / "result" / "result.json").write_text((a / "result" / "result.json").read_text())
    (b / "result" / "assignments.csv").write_text("row,cluster\n0,2\n")
    (b / "result" / "report.html").write_text((b / "result" / "report.html").read_text().replace("6 clusters",
                                                                                              "5 clusters"))
    assert same_outputs.compare(a, b) == ["result/assignments.csv: bytes differ",
                                          "result/report.html: differs beyond timings"]
    shutil.copy(a / "result" / "assignments.csv", b / "result" / "extra.csv")
    assert f"result/extra.csv: only in {b}" in same_outputs.compare(a, b)
