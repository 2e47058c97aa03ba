"""``vcmc predict``: memberships of new people under a saved fit, with the fit's schema check."""

import json

import numpy as np
import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.model import profile_offsets


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predict")
    data = tmp / "data"
    assert main(["simulate", "--design", "nested", "--separability", "easy", "--seed", "3", "--out", str(data),
                 "--n-per-silo", "300"]) == 0
    out = tmp / "fit"
    files = sorted(str(p) for p in data.glob("silo_*.csv"))
    assert main(["fit", *files, "--out", str(out), "--iterations", "1000", "--seed", "1", "--chains", "2",
                 "--no-assessment"]) == 0
    return data, out


def _reference(fit_dir, frame, n_draws):
    """Bayes' rule averaged over evenly spaced draws, from posterior.nc and schema.json read here."""
    import arviz as az

    from vcmc.data import Schema

    schema = Schema.from_json(fit_dir / "schema.json")
    tree = az.from_netcdf(fit_dir / "posterior.nc")
    pi = tree["posterior"]["pi"].values.reshape(-1, tree["posterior"]["pi"].shape[-1])
    prof = tree["posterior"]["profiles"].values.reshape(pi.shape[0], pi.shape[1], -1)
    idx = np.unique(np.linspace(0, pi.shape[0] - 1, n_draws).round().astype(int))
    offsets = profile_offsets(schema.n_modalities)
    out = np.zeros((len(frame), pi.shape[1]))
    for t in idx:
        lik = np.tile(pi[t], (len(frame), 1))
        for q, var in enumerate(schema.variables):
            for i, value in enumerate(frame[var.name]):
                if not pd.isna(value):
                    lik[i] *= prof[t, :, offsets[q] + var.modalities.index(str(value))]
        out += lik / lik.sum(axis=1, keepdims=True)
    return out / idx.size


def test_predict_writes_the_fits_formats_with_bayes_rule_memberships(fitted, tmp_path):
    data, fit_dir = fitted
    frame = pd.read_csv(data / "silo_2.csv", dtype=str).head(25)
    frame.iloc[3, 1] = np.nan                     # a missing value is skipped, not an error
    new = tmp_path / "new_people.csv"
    frame.to_csv(new, index=False)
    one = tmp_path / "one.csv"
    frame.head(1).to_csv(one, index=False)        # a single person is enough
    out = tmp_path / "scored"
    assert main(["predict", str(fit_dir), str(new), str(one), "--out", str(out), "--draws", "40"]) == 0
    member = pd.read_csv(out / "memberships.csv")
    assign = pd.read_csv(out / "assignments.csv")
    k = json.loads((fit_dir / "result.json").read_text())["n_global_clusters"]
    assert list(member.columns) == ["silo", "row"] + [f"p_{c}" for c in range(1, k + 1)]
    assert list(assign.columns) == ["silo", "row", "cluster", "probability"]
    assert member.silo.tolist() == ["new_people"] * 25 + ["one"]
    p = member[[f"p_{c}" for c in range(1, k + 1)]].to_numpy()
    np.testing.assert_allclose(p[:25], _reference(fit_dir, frame, 40), rtol=1e-10)
    np.testing.assert_allclose(p[25], p[0], rtol=1e-12)
    assert (p.argmax(axis=1) + 1 == assign.cluster).all() and (p.max(axis=1) == assign.probability).all()


def test_a_code_outside_the_schema_is_an_error_naming_file_and_column_not_the_value(fitted, tmp_path, capsys):
    data, fit_dir = fitted
    frame = pd.read_csv(data / "silo_1.csv", dtype=str).head(5)
    column = frame.columns[2]
    frame.loc[1, column] = "Zq7unseen"
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    assert main(["predict", str(fit_dir), str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad.csv" in err and repr(column) in err and "not among" in err
    assert "Zq7unseen" not in err
    assert not (tmp_path / "o").exists()


def test_predict_needs_a_complete_fit_folder(fitted, tmp_path, capsys):
    data, fit_dir = fitted
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "result.json").write_text((fit_dir / "result.json").read_text())
    assert main(["predict", str(partial), str(data / "silo_1.csv"), "--out", str(tmp_path / "o")]) == 1
    assert "schema.json does not exist" in capsys.readouterr().err
