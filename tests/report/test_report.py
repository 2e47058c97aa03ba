"""``vcmc report``: the page, its figures and characterisation on a design with known characteristic
conditions, the notes for what a result lacks, cluster names, and ``vcmc fit --report``."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from vcmc.cli import main
from vcmc.report.build import write_report

from .conftest import DESIGNED, true_odds_ratios


def _listed(folder) -> dict[int, set]:
    frame = pd.read_csv(folder / "characterisation.csv", keep_default_na=False)
    out = {}
    for r in frame.itertuples():
        name = r.variable if r.modality == "yes" else f"{r.variable}={r.modality}"
        out.setdefault(int(r.cluster), set())
        if r.listed:
            out[int(r.cluster)].add((name, 1 if r.listed == "high" else -1))
    return out


def test_the_design_separates_designed_from_free_cells():
    # the premise of the characterisation tests, from the true parameters alone
    ors = true_odds_ratios()
    designed = {(c, name) for c, items in DESIGNED.items() for name, _ in items}
    for key, value in ors.items():
        if key in designed:
            assert value >= 4.2 or value <= 1 / 4.7, key
        else:
            assert 0.5 <= value <= 2.0, key


def test_the_exact_posterior_lists_exactly_the_designed_conditions(exact_fit_dir):
    write_report(exact_fit_dir)
    assert _listed(exact_fit_dir) == DESIGNED


def test_the_page_is_self_contained_and_holds_every_section(exact_fit_dir):
    paths = write_report(exact_fit_dir)
    page = paths.html.read_text()
    assert paths.html == exact_fit_dir / "report.html"
    for title in ("Cluster sizes and weights", "Clusters against the population (heatmap)",
                  "Characterisation of the clusters", "Posterior of the number of clusters K", "Membership certainty",
                  "Per-silo contributions after disclosure control", "Convergence of the local chains",
                  "Aggregation: ELBO trace", "Global-informed rounds", "Posterior predictive checks", "Warnings",
                  "Configuration, seed and version"):
        assert f">{title}" in page, title
    # no script, no external resource: every src/href is a data URL or an anchor
    assert "<script" not in page.lower()
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith(("data:", "#")) for r in refs)
    images = re.findall(r'src="data:image/png;base64,', page)
    assert len(images) == len(paths.figures) >= 5
    for key, path in paths.figures.items():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", key
    # what this result lacks is said, not left blank
    for missing in ("diagnostics.n_clusters_posterior", "diagnostics.ppc", "diagnostics.waic", "memberships.csv",
                    "diagnostics.rounds"):
        assert re.search(r"Not available in this result:</strong>[^<]*" + re.escape(missing), page), missing
    # failing convergence values are highlighted (silo_1: R-hat 1.02 > 1.01, ESS 350 < 400), passing ones not
    assert page.count('class="num fail"') >= 2
    assert 'title="fails R-hat &lt;= 1.01">1.020<' in page and 'title="fails ESS &gt;= 400">350<' in page
    assert "a warning &lt;with&gt; markup &amp; more" in page     # text is escaped
    assert "(θ<sub>c</sub> − p̄) / √(p̄ (1 − p̄))" in page         # the scaled difference is defined


def test_the_contract_keys_of_richer_results_are_shown(exact_fit_dir):
    result = json.loads((exact_fit_dir / "result.json").read_text())
    diag = result["diagnostics"]
    diag["n_clusters_posterior"] = {"global": {"values": [2, 3, 4], "probabilities": [0.1, 0.85, 0.05]},
                                    "local": {"silo_1": {"values": [3, 4], "probabilities": [0.9, 0.1]},
                                              "silo_2": {"values": [3], "probabilities": [1.0]}}}
    row = {"variable": "asthma", "modality": "yes", "observed": 0.16, "replicated_mean": 0.161,
           "replicated_ci95": [0.15, 0.17], "ppp": 0.45, "silo": None}
    bad = dict(row, variable="copd", observed=0.2, replicated_mean=0.13, ppp=0.001)
    pair = {"variable_a": "asthma", "modality_a": "yes", "variable_b": "copd", "modality_b": "yes",
            "observed": 0.05, "replicated_mean": 0.05, "replicated_ci95": [0.04, 0.06], "ppp": 0.5, "silo": "silo_1"}
    diag["ppc"] = {"n_replicates": 200, "prevalence": {"statistic": 3.2, "p_value": 0.4, "table": [row, bad]},
                   "pairs": {"statistic": 1.1, "p_value": 0.7, "table": [pair]}}
    diag["waic"] = {"elpd_waic": -12345.6, "se": 45.6, "p_waic": 57.1, "n_rows": 6000,
                    "definition": "elpd_waic = sum_i log mean_s p(x_i | theta_s) - p_waic"}
    # the rounds, unsettled, with two births: one became cluster 2, one emptied (columns: asthma=yes is the
    # profile's column 1, smoking=current its last, 18)
    unsettled = "the rounds did not settle within 4 rounds; raise aggregation.rounds (--rounds) and compare"
    diag["warnings"] = [*diag.get("warnings", []), unsettled]
    diag["rounds"] = {"n_rounds": 4, "burn_in": 1, "n_kept": 2, "components": 6, "labels": "silo",
                      "secure_sum": True, "seconds": 1.5,
                      "per_round": [{"round": r, "k": 6 - r, "log_joint": -900.0 + r, "bytes_sent": 250_000}
                                    for r in range(1, 5)],
                      "stability": {"stable": False, "rhat": 1.31, "reason": "cap", "chains_agree": True},
                      "disclosed": {"per_round": "nothing: every vector masked and padded", "bytes_relayed": 1_000_000},
                      "births": {"share": 0.01, "budget": 2, "columns": [1, 18], "rows": [14, 11],
                                 "components": [6, 7], "clusters": [2, None]}}
    diag["rounds_plan"] = {"requested": "auto", "rounds": 4, "reason": "the analyst's own session"}
    (exact_fit_dir / "result.json").write_text(json.dumps(result))
    assign = pd.read_csv(exact_fit_dir / "assignments.csv")
    assign["probability"] = np.linspace(0.4, 1.0, len(assign))
    assign.to_csv(exact_fit_dir / "assignments.csv", index=False)

    paths = write_report(exact_fit_dir)
    page = paths.html.read_text()
    assert "Not available in this result" not in page
    assert {"k_posterior", "ppc", "membership", "rounds"} <= set(paths.figures)
    rounds = page[page.index('id="rounds"'):page.index('id="ppc"')]
    assert "4 (burn-in 1, kept 2)" in rounds and "no (log joint R-hat 1.310" in rounds
    assert f'class="warn">{unsettled}<' in rounds                     # the unsettled rounds are said here too
    assert "<td>asthma=yes</td><td class=\"num\">14</td><td>2</td>" in rounds
    assert "<td>smoking=current</td>" in rounds and "none (emptied, or under the minimum size)" in rounds
    assert "nothing: every vector masked and padded" in rounds and "1.0 MB over the rounds" in rounds
    assert "-12,345.6" in page and "elpd_waic = sum_i" in page
    assert ">copd<" in page and 'class="num fail">0.001<' in page     # the flagged check is listed
    assert "median 0.700" in page                                      # of linspace(0.4, 1.0)


def test_names_carry_through_every_table_and_figure(exact_fit_dir, monkeypatch):
    from vcmc.report import figures

    seen = {}
    for name in ("sizes_figure", "heatmap_figure", "membership_figure", "contributions_figure"):
        original = getattr(figures, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            seen[_name] = args
            return _original(*args, **kwargs)

        monkeypatch.setattr(figures, name, spy)
    labels = exact_fit_dir / "names.csv"
    labels.write_text("cluster,label\n1,Baseline\n2,Respiratory smokers\n3,Stroke & dementia\n")
    assert main(["report", str(exact_fit_dir), "--labels", str(labels), "--out", str(exact_fit_dir / "r.html")]) == 0
    page = (exact_fit_dir / "r.html").read_text()
    names = ["1: Baseline", "2: Respiratory smokers", "3: Stroke &amp; dementia"]
    want = [n.replace("&amp;", "&") for n in names]
    assert seen["sizes_figure"][0] == want
    # the heatmap's columns carry each cluster's share and size beside its name
    assert [c.split(" (")[0] for c in seen["heatmap_figure"][2]] == want
    assert all(", n = " in c for c in seen["heatmap_figure"][2])
    assert seen["membership_figure"][1] == want
    assert seen["contributions_figure"][2] == want
    # the tables: sizes, characterisation and per-silo contributions
    assert page.count("<td>Respiratory smokers</td>") >= 2
    assert page.count("<th>2: Respiratory smokers</th>") == 1
    frame = pd.read_csv(exact_fit_dir / "characterisation.csv", keep_default_na=False)
    assert set(frame.label) == {"Baseline", "Respiratory smokers", "Stroke & dementia"}


def test_wrong_labels_are_an_error_of_the_command_naming_the_file(exact_fit_dir, capsys):
    labels = exact_fit_dir / "names.csv"
    labels.write_text("cluster,label\n1,A\n2,B\n7,C\n")
    assert main(["report", str(exact_fit_dir), "--labels", str(labels)]) == 1
    err = capsys.readouterr().err
    assert "vcmc report: error:" in err and "names.csv" in err and "cluster 7" in err
    assert not (exact_fit_dir / "report.html").exists()


@pytest.mark.parametrize("diagnostics", [
    # full MCMC: the pooled sampler's R-hat/ESS at the top level, P(K = k) as a list
    {"rhat_log_posterior": 1.2, "ess_bulk_log_posterior": 90.0, "n_clusters_posterior": [0, 0, 0.1, 0.9]},
    # FedMerDel and DisCGS: lists where VCMC has mappings, no ELBO trace, a prior given as a word
    {"local": [{"elbo": [1.0, 2.0]}], "server": {}, "weights_estimate": "x", "n_local_clusters": [3, 3]},
    {}])
def test_the_comparators_results_render_with_their_own_diagnostics(exact_fit_dir, diagnostics):
    result = json.loads((exact_fit_dir / "result.json").read_text())
    result["diagnostics"] = diagnostics
    result["config"] = {"prior": "finite", "beta": [0.5]} if "server" in diagnostics else {}
    (exact_fit_dir / "result.json").write_text(json.dumps(result))
    (exact_fit_dir / "posterior.nc").unlink()
    prof = pd.read_csv(exact_fit_dir / "profiles.csv")
    prof.drop(columns=["ci95_low", "ci95_high"]).to_csv(exact_fit_dir / "profiles.csv", index=False)
    page = write_report(exact_fit_dir).html.read_text()
    assert "Not available in this result:</strong> a characterisation" in page
    assert "no specific modality" not in page        # no rule applied: no claim of "nothing special" either
    if "rhat_log_posterior" in diagnostics:
        assert "<td>pooled</td>" in page and 'title="fails R-hat &lt;= 1.01">1.200<' in page
        assert "the pooled sampler's number of occupied components" in page


def test_report_has_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--help"])
    assert exc.value.code == 0
    assert "--labels FILE" in capsys.readouterr().out


def test_a_folder_without_a_fit_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert "result.json: not found" in capsys.readouterr().err


def test_without_posterior_draws_the_intervals_decide(exact_fit_dir):
    (exact_fit_dir / "posterior.nc").unlink()
    page = write_report(exact_fit_dir).html.read_text()
    assert "posterior.nc is absent" in page
    # the clusters' 95% intervals against pbar's point estimate: the designed cells still pass (their
    # intervals lie far from pbar), none of the free ones (true odds ratio within [0.5, 2])
    assert _listed(exact_fit_dir) == DESIGNED


@pytest.mark.parametrize("n_chains", [2])
def test_chains_are_pooled_and_thinned_to_at_most_max_draws(exact_fit_dir, n_chains, monkeypatch):
    import arviz as az
    import xarray as xr

    from vcmc.report import load

    tree = xr.open_datatree(exact_fit_dir / "posterior.nc", engine="h5netcdf")
    pi = tree["posterior"]["pi"].values            # (1, 1000, 3)
    prof = tree["posterior"]["profiles"].values
    cols = [str(c) for c in tree["posterior"]["profiles"]["column"].values]
    tree.close()
    tiled = az.from_dict({"posterior": {"pi": np.concatenate([pi] * n_chains),
                                        "profiles": np.concatenate([prof] * n_chains)}},
                         dims={"pi": ["cluster"], "profiles": ["cluster", "column"]},
                         coords={"cluster": [1, 2, 3], "column": cols})
    tiled.to_netcdf(exact_fit_dir / "posterior.nc")
    monkeypatch.setattr(load, "MAX_DRAWS", 700)
    fit = load.load_fit(exact_fit_dir)
    assert fit.n_chains == 2 and fit.n_draws_total == 2000
    assert fit.pi_draws.shape == (2 * 334, 3)           # every 3rd draw (ceil(2000 / 700)) of each chain
    np.testing.assert_array_equal(fit.pi_draws[:334], pi[0, ::3])
    np.testing.assert_array_equal(fit.pi_draws[334:], pi[0, ::3])


def test_fit_with_report_on_the_named_design_lists_the_designed_conditions(tmp_path, named_design):
    silos, labels = named_design
    data = tmp_path / "data"
    data.mkdir()
    silos[0].schema.to_json(data / "schema.json")
    for s in silos:
        frame = pd.DataFrame({v.name: np.asarray(v.modalities)[s.codes[:, q]]
                              for q, v in enumerate(s.schema.variables)})
        frame.to_csv(data / f"{s.name}.csv", index=False)
    out = tmp_path / "fit"
    rc = main(["fit", *sorted(str(p) for p in data.glob("silo_*.csv")), "--out", str(out), "--iterations", "2000",
               "--seed", "3", "--report"])
    assert rc == 0
    assert (out / "report.html").is_file() and (out / "figures" / "heatmap.png").is_file()
    assert (out / "figures" / "rounds.png").is_file()                  # the default fit ran the rounds
    result = json.loads((out / "result.json").read_text())
    assert result["n_clusters"] == 3
    # the fitted clusters are numbered by the fit: match each to its true cluster by majority
    assign = pd.read_csv(out / "assignments.csv")
    truth = np.concatenate(labels) + 1
    est = np.concatenate([assign[assign.silo == s.name].cluster.to_numpy() for s in silos])
    to_true = {int(f): int(np.bincount(truth[est == f]).argmax()) for f in np.unique(est)}
    assert sorted(to_true.values()) == [1, 2, 3]
    listed = _listed(out)
    assert {to_true[f]: items for f, items in listed.items() if f in to_true} == DESIGNED
