"""``vcmc report DIR`` on a latent class analysis' folder: the page ``--report`` writes, from the files."""

import pytest

from vcmc.cli import main
from vcmc.lca.simulate import simulate_lca


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("lca-report")
    sim = simulate_lca((150, 150, 150), missing=0.03, rng=9)
    paths = []
    for i, df in enumerate(sim.frames):
        p = d / f"site{i + 1}.csv"
        df.to_csv(p, index=False)
        paths.append(str(p))
    return paths


def _report_again(folder, capsys):
    """The page written with --report, then the page `vcmc report DIR` writes from the folder's files."""
    at_fit = (folder / "report.html").read_text()
    (folder / "report.html").unlink()
    assert main(["report", str(folder)]) == 0
    assert f"report: {folder / 'report.html'}" in capsys.readouterr().out
    return at_fit, (folder / "report.html").read_text()


def test_report_of_a_fit_k_folder_is_the_fit_time_page(files, tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", *files, "--k", "3", "--covariates", "age,sex", "--distal", "death,score", "--out", str(out),
                 "--starts", "2", "--seed", "3", "--report"]) == 0
    at_fit, again = _report_again(out, capsys)
    assert again == at_fit          # the same tables, figures and numbers, byte for byte
    for title in ("Fit statistics (K = 3)", "Item-response probabilities", "Covariates of class membership",
                  "Distal outcomes by class", "Forest plot"):
        assert title in again
    assert again.count("data:image/png;base64") == 2        # the item-response plot and the forest plot


def test_report_of_a_compare_folder_is_the_fit_time_page(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", *files, "--k", "1-3", "--out", str(out), "--starts", "2", "--seed", "1",
                 "--waic-draws", "20", "--exclude", "age,sex,death,score", "--report"]) == 0
    at_fit, again = _report_again(out, capsys)
    assert again == at_fit
    assert "Choosing the number of classes" in again and "Report K = 3 (BIC)" in again


def test_report_of_a_fit_k_folder_without_three_step_models(files, tmp_path, capsys):
    out = tmp_path / "plain"
    d = tmp_path / "items"
    d.mkdir()
    import pandas as pd

    items = []
    for f in files:
        p = d / f.rsplit("/", 1)[-1]
        pd.read_csv(f, dtype=str, keep_default_na=False).drop(columns=["age", "sex", "death", "score"]).to_csv(
            p, index=False)
        items.append(str(p))
    assert main(["fit", *items, "--k", "2", "--out", str(out), "--starts", "1", "--seed", "2", "--report"]) == 0
    at_fit, again = _report_again(out, capsys)
    assert again == at_fit and "Forest plot" not in again


def test_a_damaged_lca_folder_is_named_in_the_error(files, tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", *files, "--k", "2", "--covariates", "age,sex", "--distal", "death,score", "--out",
                 str(out), "--starts", "1", "--seed", "3"]) == 0
    capsys.readouterr()
    (out / "item_probabilities.csv").unlink()
    assert main(["report", str(out)]) != 0
    err = capsys.readouterr().err
    assert "item_probabilities.csv" in err and str(out) in err
    (out / "lca.json").write_text("{not json")
    assert main(["report", str(out)]) != 0
    assert "lca.json" in capsys.readouterr().err
