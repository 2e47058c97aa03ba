"""Tests of ``vcmc simulate``: the file contract later commands rely on."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.research.simulate import simulate_design


def test_simulate_writes_the_contract_files(tmp_path, capsys):
    out = tmp_path / "sim"
    rc = main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "5",
               "--out", str(out), "--n-per-silo", "80"])
    assert rc == 0
    assert str(out) in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ["schema.json", "silo_1.csv", "silo_2.csv", "silo_3.csv", "silo_4.csv", "truth.csv",
                     "truth.json"]
    truth = pd.read_csv(out / "truth.csv")
    assert list(truth.columns) == ["silo", "row", "cluster"]
    assert truth["silo"].unique().tolist() == ["silo_1", "silo_2", "silo_3", "silo_4"]
    # Table 1, nested design: silo 4 holds only clusters 1 and 2; silo 3 only 1-3.
    assert set(truth.loc[truth.silo == "silo_4", "cluster"]) <= {1, 2}
    assert set(truth.loc[truth.silo == "silo_3", "cluster"]) <= {1, 2, 3}
    assert truth["cluster"].min() >= 1 and truth["cluster"].max() <= 6
    for s in range(1, 5):
        frame = pd.read_csv(out / f"silo_{s}.csv")
        assert list(frame.columns) == [f"V{q}" for q in range(1, 11)]
        assert len(frame) == 80
        rows = truth.loc[truth.silo == f"silo_{s}", "row"].to_numpy()
        np.testing.assert_array_equal(rows, np.arange(80))
    info = json.loads((out / "truth.json").read_text())
    assert info["design"] == "nested" and info["separability"] == "easy" and info["seed"] == 5
    np.testing.assert_allclose(info["weights"]["silo_4"], [0.5, 0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(info["global_weights"], [0.3, 0.3, 0.175, 0.55 / 6, 0.55 / 6, 0.25 / 6])
    for cluster in info["profiles"].values():
        for probs in cluster.values():
            assert sum(probs.values()) == pytest.approx(1.0)
    # The CLI writes exactly what the library simulates for the same seed.
    d = simulate_design("nested", "easy", rng=5, n_per_silo=80)
    np.testing.assert_array_equal(truth["cluster"].to_numpy(), d.pooled_labels + 1)
    frame = pd.read_csv(out / "silo_2.csv")
    np.testing.assert_array_equal(frame.to_numpy() - 1, d.silos[1].codes)


def test_same_seed_same_files(tmp_path):
    for name in ("a", "b"):
        assert main(["simulate", "--design", "non-nested", "--separability", "poor", "--seed", "9",
                     "--out", str(tmp_path / name), "--n-per-silo", "30", "--missing-rate", "0.1"]) == 0
    for f in ("silo_1.csv", "silo_4.csv", "truth.csv", "truth.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    # missing values are empty fields and keep their rows
    frame = pd.read_csv(tmp_path / "a" / "silo_1.csv", dtype=str, keep_default_na=False)
    assert len(frame) == 30 and (frame == "").to_numpy().any()


def test_bad_arguments_exit_with_usage(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--design", "bogus", "--separability", "easy", "--seed", "1",
              "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "1", "--out",
              str(tmp_path), "--n-per-silo", "1"])
    assert "expected an integer >= 2; got 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "1", "--out",
              str(tmp_path), "--missing-rate", "1.5"])
    assert "expected a number in [0, 1); got 1.5" in capsys.readouterr().err


def test_unwritable_output_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["simulate", "--design", "homogeneous", "--separability", "easy", "--seed", "1",
               "--out", str(blocker / "sub"), "--n-per-silo", "5"])
    assert rc == 1
    # the --out checks every writing command shares (vcmc.outputs.folder): the file in the way is named
    assert f"--out {blocker / 'sub'}: {blocker} is a file, so the folder cannot be created" in capsys.readouterr().err


def test_help_works_from_the_installed_entry_point():
    exe = Path(sys.executable).parent / "vcmc"
    if not exe.exists():
        pytest.skip("the vcmc console script is not installed next to this Python")
    res = subprocess.run([str(exe), "simulate", "--help"], capture_output=True, text=True, check=False)
    assert res.returncode == 0
    assert "--n-per-silo" in res.stdout and "--design" in res.stdout


# -- design ehr: the synthetic cohort of the paper's section 6 ------------------------------------------------
def test_ehr_writes_the_contract_files_and_matches_the_library(tmp_path, capsys):
    from vcmc.research.ehr import CONDITIONS, simulate_ehr

    out = tmp_path / "ehr"
    assert main(["simulate", "--design", "ehr", "--n", "6000", "--silos", "5", "--seed", "3",
                 "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ["schema.json", *[f"silo_{s}.csv" for s in range(1, 6)], "truth.csv", "truth.json"]
    truth = pd.read_csv(out / "truth.csv")
    assert list(truth.columns) == ["silo", "row", "cluster"] and len(truth) == 6000
    assert truth["cluster"].min() == 1 and truth["cluster"].max() == 27
    frame = pd.read_csv(out / "silo_2.csv", dtype=str, keep_default_na=False)
    assert list(frame.columns) == [c.id for c in CONDITIONS]
    assert set(np.unique(frame.to_numpy())) == {"no", "yes"}
    info = json.loads((out / "truth.json").read_text())
    assert info["design"] == "ehr" and info["seed"] == 3 and info["allocation"] == "uniform"
    assert {k: info["characterisation"]["cluster_9"][k] for k in ("high", "low")} == {"high": ["dementia"],
                                                                                     "low": ["hypertension"]}
    assert info["condition_names"]["hiv"] == "HIV"
    assert json.loads((out / "schema.json").read_text())["variables"][0] == {
        "name": "hypertension", "modalities": ["no", "yes"]}
    d = simulate_ehr(n=6000, n_silos=5, rng=3)
    np.testing.assert_array_equal(truth["cluster"].to_numpy(), d.pooled_labels + 1)
    np.testing.assert_array_equal((frame.to_numpy() == "yes").astype(np.int16), d.silos[1].codes)


def test_ehr_seed_determines_the_files(tmp_path):
    for name, seed in (("a", "4"), ("b", "4"), ("c", "5")):
        assert main(["simulate", "--design", "ehr", "--n", "3000", "--silos", "3", "--seed", seed,
                     "--out", str(tmp_path / name)]) == 0
    for f in ("silo_1.csv", "silo_3.csv", "truth.csv", "truth.json", "schema.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / "silo_1.csv").read_bytes() != (tmp_path / "c" / "silo_1.csv").read_bytes()


def test_ehr_region_allocation_writes_one_file_per_region(tmp_path):
    from vcmc.research.ehr import REGIONS

    out = tmp_path / "reg"
    assert main(["simulate", "--design", "ehr", "--n", "4000", "--allocation", "region", "--seed", "1",
                 "--out", str(out)]) == 0
    files = sorted(p.name for p in out.glob("silo_*.csv"))
    assert files == sorted(f"silo_{r}.csv" for r, _ in REGIONS) and len(files) == 13
    assert "silo_london.csv" in files and "silo_yorkshire_and_humber.csv" in files
    info = json.loads((out / "truth.json").read_text())
    assert info["allocation"] == "region" and info["regions"]["silo_london"] == "London"
    assert set(pd.read_csv(out / "truth.csv")["silo"]) == {f"silo_{r}" for r, _ in REGIONS}
    # 13 is accepted explicitly too
    assert main(["simulate", "--design", "ehr", "--n", "4000", "--allocation", "region", "--silos", "13",
                 "--seed", "1", "--out", str(tmp_path / "reg13")]) == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--design", "ehr", "--separability", "easy"], "--separability does not apply to --design ehr"),
    (["--design", "ehr", "--n-per-silo", "50", "--exact"], "--n-per-silo, --exact do not apply"),
    (["--design", "ehr", "--missing-rate", "0.1"], "--missing-rate does not apply"),
    (["--design", "ehr", "--allocation", "region", "--silos", "30"], "--silos must be omitted or 13"),
    (["--design", "nested"], "--design nested requires --separability"),
    (["--design", "nested", "--separability", "easy", "--n", "100"], "--n does not apply to --design nested"),
    (["--design", "homogeneous", "--separability", "poor", "--allocation", "region", "--silos", "3"],
     "--silos, --allocation do not apply"),
])
def test_options_of_the_other_family_are_refused(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", *argv, "--seed", "1", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_ehr_too_few_people_is_a_clear_error(tmp_path, capsys):
    rc = main(["simulate", "--design", "ehr", "--n", "20", "--silos", "30", "--seed", "1",
               "--out", str(tmp_path / "x")])
    assert rc == 1
    assert "'n' parameter of simulate_ehr must be an integer >= 60" in capsys.readouterr().err
