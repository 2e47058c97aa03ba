"""One set of site files for every command (issue 46): covariate, outcome and identifier columns stay in the
files, declared in the schema with a role or left out with --exclude; the fixed-K model is a full result."""

import json

import numpy as np
import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.data import Schema
from vcmc.lca.simulate import simulate_lca


@pytest.fixture(scope="module")
def site_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sites")
    sim = simulate_lca((250, 250, 250), missing=0.05, rng=4)
    paths = []
    for i, df in enumerate(sim.frames):
        df = df.drop(columns=["score"]).copy()
        df.insert(0, "pid", np.arange(len(df)) + 1000 * i)
        df["note"] = "x"
        p = d / f"site{i + 1}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
    return d, paths


def test_schema_writes_roles_and_every_command_reads_the_same_files(site_files, capsys):
    d, files = site_files
    schema = d / "schema-roles.json"
    assert main(["schema", *files, "--out", str(schema), "--covariates", "age,sex", "--distal", "death",
                 "--exclude", "note", "--id-column", "pid"]) == 0
    s = Schema.from_json(schema)
    assert s.role_columns("covariate") == ("age", "sex") and s.id_column == "pid"
    assert "age" not in s.names and s.fingerprint() == Schema(s.variables).fingerprint()
    assert main(["schema", *files, "--check", str(schema)]) == 0
    # fixed K: the schema's covariates and outcome are used; the result is a full result
    out = d / "k3"
    assert main(["fit", *files, "--schema", str(schema), "--k", "3", "--starts", "3", "--out", str(out),
                 "--seed", "1"]) == 0
    doc = json.loads((out / "lca.json").read_text())
    assert doc["settings"]["covariates"] == "age,sex" and doc["settings"]["distal"] == "death"
    assert doc["starts_at_best"] >= 2 and len(doc["start_log_likelihoods"]) >= 3
    members = pd.read_csv(out / "memberships.csv")
    assert len(members) == 750 and np.allclose(members[["p_1", "p_2", "p_3"]].sum(axis=1), 1)
    assert (out / "covariates.csv").is_file() and (out / "assignments.csv").is_file()
    items = pd.read_csv(out / "item_probabilities.csv")
    assert items["interval"].isin(["wald-logit", "profile"]).all() and (items.ci95_high > items.ci95_low).all()
    # vcmc predict and vcmc report take the fixed-K folder
    assert main(["predict", str(out), files[0], "--out", str(d / "pred")]) == 0
    pred = pd.read_csv(d / "pred" / "memberships.csv")
    assert np.allclose(pred[["p_1", "p_2", "p_3"]].to_numpy(), members[members.silo == "site1"][
        ["p_1", "p_2", "p_3"]].to_numpy())
    assert main(["report", str(out)]) == 0 and (out / "report.html").is_file()
    # compare reads the same files with the same schema
    assert main(["compare", *files, "--schema", str(schema), "--k", "2-3", "--starts", "2", "--waic-draws", "0",
                 "--out", str(d / "cmp"), "--seed", "1"]) == 0
    capsys.readouterr()


def test_exclude_flag_everywhere_and_errors_name_the_file(site_files, capsys):
    d, files = site_files
    assert main(["fit", *files, "--k", "2", "--starts", "2", "--out", str(d / "ex"), "--seed", "1",
                 "--exclude", "note,pid,age,sex,death"]) == 0
    # a misspelt --exclude column names the file; a refused compare leaves no folder behind
    assert main(["compare", *files, "--k", "2", "--out", str(d / "refused"), "--exclude", "nope"]) == 1
    assert files[0] in capsys.readouterr().err
    assert not (d / "refused").exists()
    # without roles or --exclude, the inference error names the files, not "data frame 1"
    assert main(["compare", *files, "--k", "2", "--out", str(d / "refused2")]) == 1
    err = capsys.readouterr().err
    assert "data frame" not in err and "site1.csv" in err


def test_compare_takes_a_silo_column(site_files, capsys):
    d, files = site_files
    pooled = pd.concat([pd.read_csv(f).assign(site=f"s{i}") for i, f in enumerate(files)])
    pooled.to_csv(d / "pooled.csv", index=False)
    assert main(["compare", str(d / "pooled.csv"), "--silo-column", "site", "--k", "1-2", "--starts", "2",
                 "--waic-draws", "0", "--exclude", "note,pid,age,sex,death", "--out", str(d / "cmp-col"),
                 "--seed", "1"]) == 0
    table = pd.read_csv(d / "cmp-col" / "comparison.csv")
    assert table.k.tolist() == [1, 2]
    assert "on 3 silos" in capsys.readouterr().out
