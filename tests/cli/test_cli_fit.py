"""``vcmc fit`` and ``vcmc demo`` from the command line, as a user runs them."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.exceptions import ConfigError


def test_help_on_every_command(capsys):
    for cmd in ("fit", "demo", "simulate", "predict"):
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
    assert list(assign.columns) == ["silo", "row", "cluster", "probability"]
    # memberships.csv: one row per input row, K = every global cluster, and the label is its most probable
    member = pd.read_csv(out / "memberships.csv")
    k = result["n_global_clusters"]
    assert list(member.columns) == ["silo", "row"] + [f"p_{c}" for c in range(1, k + 1)]
    p = member[[f"p_{c}" for c in range(1, k + 1)]].to_numpy()
    assert (member[["silo", "row"]].to_numpy() == assign[["silo", "row"]].to_numpy()).all()
    assert abs(p.sum(axis=1) - 1).max() < 1e-12
    assert (p.argmax(axis=1) + 1 == assign.cluster.to_numpy()).all()
    assert (p.max(axis=1) == assign.probability.to_numpy()).all()
    assert (out / "schema.json").exists()
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


def test_config_file_set_and_flags_drive_one_config_in_that_order(tmp_path):
    """--config (tables and dotted keys as in the Flower run config), then --set, then the typed flags."""
    from vcmc.cli import build_parser
    from vcmc.cli.fit import config_from_args

    run = tmp_path / "run.toml"
    run.write_text('aggregation.stop = "plateau"\n\n[sampler]\nn-iter = 2000\nthin = 2\n\n'
                   '[matching]\nmethod = "min-divergence"\n')

    def cfg(*extra):
        return config_from_args(build_parser().parse_args(["fit", "a.csv", "--out", "o", "--config", str(run),
                                                           *extra]))

    base = cfg()
    assert (base.sampler.n_iter, base.sampler.burn_in, base.sampler.thin) == (2000, 1000, 2)
    assert base.matching.method == "min-divergence" and base.aggregation.stop == "plateau"
    over = cfg("--set", "sampler.n-iter=3000", "--set", "privacy.round-to=5", "--matching", "ball")
    assert (over.sampler.n_iter, over.sampler.burn_in) == (3000, 1500)
    assert over.privacy.round_to == 5 and over.matching.method == "ball"
    flag = cfg("--set", "sampler.n-iter=3000", "--iterations", "4000", "--burn-in", "100")
    assert (flag.sampler.n_iter, flag.sampler.burn_in) == (4000, 100)
    # every option is reachable, with the parser's messages naming the key
    assert cfg("--set", "postprocess.merge-unresolved=true").postprocess.merge_unresolved is True
    import pytest

    from vcmc.exceptions import ConfigError

    with pytest.raises(ConfigError, match="'sampler.n-itr'"):
        cfg("--set", "sampler.n-itr=5")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        cfg("--set", "sampler.n-iter")


def test_a_fit_driven_by_a_config_file_records_it(tmp_path):
    data = tmp_path / "data"
    assert main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "3", "--out", str(data),
                 "--n-per-silo", "200"]) == 0
    run = tmp_path / "run.toml"
    run.write_text("[sampler]\nn-iter = 600\n[aggregation]\nmax-iter = 20\n")
    out = tmp_path / "out"
    files = sorted(str(p) for p in data.glob("silo_*.csv"))
    assert main(["fit", *files, "--out", str(out), "--config", str(run), "--set", "matching.level=0.9999",
                 "--seed", "1"]) == 0
    effective = json.loads((out / "result.json").read_text())["config"]
    assert effective["sampler"]["n_iter"] == 600 and effective["sampler"]["burn_in"] == 300
    assert effective["aggregation"]["max_iter"] == 20 and effective["matching"]["level"] == 0.9999


def test_iterations_auto_stops_at_the_targets_with_a_short_burn_in_capped_by_max_iterations(capsys):
    from vcmc.cli import build_parser, main
    from vcmc.cli.fit import config_from_args
    from vcmc.config.options import AUTO_BURN_IN

    def config(*extra):
        return config_from_args(build_parser().parse_args(["fit", "a.csv", "--out", "o", *extra]))

    auto = config("--iterations", "auto").sampler
    assert (auto.stop, auto.n_iter, auto.burn_in) == ("converged", 50_000, AUTO_BURN_IN)
    capped = config("--iterations", "AUTO", "--max-iterations", "6000").sampler
    assert (capped.stop, capped.n_iter, capped.burn_in) == ("converged", 6000, 3000)
    assert config("--iterations", "auto", "--burn-in", "800").sampler.burn_in == 800
    assert config("--iterations", "4000").sampler.stop == "fixed"
    with pytest.raises(ConfigError, match="--max-iterations caps --iterations auto"):
        config("--iterations", "4000", "--max-iterations", "6000")
    with pytest.raises(SystemExit) as exited:
        main(["fit", "a.csv", "--out", "o", "--iterations", "lots"])
    assert exited.value.code == 2
    assert "expected a whole number of iterations or 'auto', got 'lots'" in capsys.readouterr().err


def test_rounds_take_auto_or_a_number_of_at_least_one(capsys):
    from vcmc.cli import build_parser, main
    from vcmc.cli.fit import config_from_args

    def config(*extra):
        return config_from_args(build_parser().parse_args(["fit", "a.csv", "--out", "o", *extra]))

    assert config().aggregation.rounds == 0                      # auto, the default (vcmc.rounds.plan)
    assert config("--rounds", "Auto").aggregation.rounds == 0
    assert config("--rounds", "1").aggregation.rounds == 1         # the paper's one-shot pass
    assert config("--rounds", "2000").aggregation.rounds == 2000
    assert config("--set", "aggregation.rounds=500").aggregation.rounds == 500
    for bad in ("0", "many"):
        with pytest.raises(SystemExit) as exited:
            main(["fit", "a.csv", "--out", "o", "--rounds", bad])
        assert exited.value.code == 2
        assert f"expected a whole number of rounds >= 1 or 'auto', got '{bad}'" in capsys.readouterr().err
