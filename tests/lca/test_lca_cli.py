"""``vcmc compare`` and ``vcmc fit --k``: the files and columns of the issue's contract, clear errors."""

import json

import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.lca.simulate import simulate_lca


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("lca")
    sim = simulate_lca((250, 250, 250), missing=0.03, rng=9)
    paths = []
    for i, df in enumerate(sim.frames):
        p = d / f"site{i + 1}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
    return paths


def test_compare_writes_the_table_and_the_figure(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", *files, "--k", "1-4", "--out", str(out), "--starts", "2", "--seed", "1",
                 "--waic-draws", "20", "--exclude", "age,sex,death,score"]) == 0
    table = pd.read_csv(out / "comparison.csv")
    assert list(table.columns) == ["k", "log_likelihood", "n_parameters", "aic", "bic", "sabic", "caic", "entropy",
                                   "relative_entropy", "waic", "smallest_class", "starts", "starts_at_best"]
    assert table.k.tolist() == [1, 2, 3, 4]
    assert (out / "comparison.png").stat().st_size > 1000
    assert "BIC chooses K = 3" in capsys.readouterr().out
    # a second run into the same folder is refused without --overwrite
    assert main(["compare", *files, "--k", "2", "--out", str(out), "--exclude", "age,sex,death,score"]) == 1
    assert "--overwrite" in capsys.readouterr().err


def test_fit_k_writes_covariates_and_distal_tables(files, tmp_path):
    out = tmp_path / "fit"
    assert main(["fit", *files, "--k", "3", "--covariates", "age,sex", "--distal", "death,score", "--out", str(out),
                 "--starts", "2", "--seed", "3", "--report"]) == 0
    cov = pd.read_csv(out / "covariates.csv")
    assert list(cov.columns) == ["cluster", "term", "estimate", "se", "ci95_low", "ci95_high"]
    assert set(cov.cluster) == {2, 3} and set(cov.term) == {"intercept", "age", "sex=m"}
    dis = pd.read_csv(out / "distal.csv")
    assert list(dis.columns) == ["cluster", "outcome", "level", "estimate", "se", "ci95_low", "ci95_high"]
    assert set(pd.read_csv(out / "distal_tests.csv").outcome) == {"death", "score"}
    doc = json.loads((out / "lca.json").read_text())
    assert doc["k"] == 3 and doc["reference_cluster"] == 1 and "bic" in doc["statistics"]
    for name in ("item_probabilities.png", "forest.png", "report.html", "fit_statistics.csv"):
        assert (out / name).is_file()


def test_bayesian_flags_are_refused_with_k(files, tmp_path, capsys):
    assert main(["fit", *files, "--k", "2", "--alpha", "0.1", "--out", str(tmp_path / "y")]) == 1
    assert "--alpha belong to the Bayesian fit" in capsys.readouterr().err


def test_overwrite_removes_an_earlier_runs_continuous_table(files, tmp_path):
    """``continuous.csv`` is a result file: a categorical fit written over a run that had continuous variables
    does not leave that run's means beside its own results."""
    out = tmp_path / "over"
    args = ["fit", *files, "--k", "2", "--out", str(out), "--starts", "1", "--exclude", "age,sex,death,score",
            "--standard-errors", "complete-data"]
    assert main([*args, "--seed", "1"]) == 0
    (out / "continuous.csv").write_text("cluster,variable,mean\n1,X1,50.0\n")   # as a mixed run leaves it
    assert main([*args, "--seed", "2", "--overwrite"]) == 0
    assert not (out / "continuous.csv").exists()
    assert (out / "lca.json").is_file()
