"""``vcmc fit`` and ``vcmc demo`` from the command line, as a user runs them."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from vcmc.cli import main


def test_help_on_every_command(capsys):
    for cmd in ("fit", "demo", "simulate"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        assert "usage: vcmc" in capsys.readouterr().out


def test_fit_writes_the_contract(tmp_path):
    data = tmp_path / "data"
    assert main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "3", "--out", str(data),
                 "--n-per-silo", "400"]) == 0
    files = sorted(str(p) for p in data.glob("silo_*.csv"))
    out = tmp_path / "out"
    rc = main(["fit", *files, "--out", str(out), "--iterations", "2000", "--seed", "1", "--jobs", "1"])
    assert rc == 0
    result = json.loads((out / "result.json").read_text())
    assert result["n_clusters"] >= 1
    assert {"apply", "matching", "aggregation", "total"} <= set(result["timings_s"])
    assign = pd.read_csv(out / "assignments.csv")
    truth = pd.read_csv(data / "truth.csv")
    assert list(assign.columns) == ["silo", "row", "cluster"]
    merged = truth.merge(assign, on=["silo", "row"], suffixes=("_true", "_est"))
    assert len(merged) == len(truth) == 1600
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(merged.cluster_true, merged.cluster_est) > 0.8
    prof = pd.read_csv(out / "profiles.csv")
    assert {"cluster", "variable", "modality", "estimate", "ci95_low", "ci95_high"} <= set(prof.columns)
    assert (out / "posterior.nc").exists()


def test_fit_missing_file_is_a_clear_error(tmp_path, capsys):
    rc = main(["fit", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o"), "--iterations", "100"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "nope.csv" in err


def test_fit_silo_column_with_several_files_is_refused(tmp_path, capsys):
    a = tmp_path / "a.csv"
    a.write_text("V1,site\n1,x\n2,y\n")
    rc = main(["fit", str(a), str(a), "--silo-column", "site", "--out", str(tmp_path / "o")])
    assert rc == 1
    assert "--silo-column" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vcmc.cli", "demo", "--out", str(tmp_path / "demo"),
                           "--iterations", "4000", "--jobs", "2"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Clusters found: 6" in proc.stdout
    assert (tmp_path / "demo" / "result" / "result.json").exists()


def test_cli_and_flower_run_config_build_the_same_config():
    """The CLI and the Flower app build identical FitConfig objects from equivalent options."""
    from vcmc.cli import build_parser
    from vcmc.cli.fit import config_from_args
    from vcmc.config import FitConfig, MatchingConfig, config_from_mapping

    args = build_parser().parse_args(["fit", "a.csv", "--out", "o", "--iterations", "2000", "--matching",
                                      "min-divergence", "--alpha", "0.05", "--min-cluster-size", "12"])
    flower_run_config = {"seed": 3, "out-dir": "/abs", "sampler.n-iter": 2000, "sampler.burn-in": 1000,
                         "matching.method": "min-divergence", "prior.alpha": 0.05,
                         "privacy.min-cluster-size": 12}
    from_cli = config_from_args(args)
    assert from_cli == config_from_mapping(flower_run_config, ignore=("seed", "out-dir"))
    assert from_cli.matching == MatchingConfig(method="min-divergence")
    assert from_cli.aggregation == FitConfig().aggregation
