"""The catalogue's cases of the first day with one's own data (issue 22): label variants, the writer
discipline of every command (lock, run key, sealed result sets, signals), refusals before sampling and the
warnings said where people look. One test per case of ``cases.WORKFLOW_CASES`` and of the non-failing
``cases.WORKFLOW_DATA_CASES`` (the failing ones run in ``test_catalogue_cli.py``'s parametrized test)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from vcmc.cli import main

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402
from test_catalogue_cli import FAST, PY, fit_case, result_of, run, write_files  # noqa: E402


def _case(name):
    return next(c for c in cases.ALL_CASES if c.id == name)


def _fit(tmp_path, capsys, out="out", *extra, files=None):
    files = files or write_files(tmp_path, cases.base())
    return run(capsys, *files, "--out", str(tmp_path / out), *FAST, *extra)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _main(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _no_sampling(monkeypatch):
    import vcmc.mcmc.apply as apply_mod

    monkeypatch.setattr(apply_mod, "run_apply_step", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the sampler ran")))


# -- label variants and data warnings ------------------------------------------------------------------------------
def test_unicode_forms(tmp_path, capsys):
    rc, _, err = fit_case(tmp_path, capsys, _case("unicode-forms"))
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    n_cells = len(cases.clean_rows(1)[::3])                       # the NFD cells the case wrote into b.csv
    assert data["normalised"] == [{"silo": "b", "column": "region", "from": cases.ZURICH_NFD,
                                   "to": cases.ZURICH_NFC, "cells": n_cells}]
    prof = pd.read_csv(tmp_path / "out" / "profiles.csv", dtype=str)
    assert sorted(prof.loc[prof.variable == "region", "modality"].unique()) == sorted(
        ["east", "north", "south", cases.ZURICH_NFC])


def test_missing_code_modality(tmp_path, capsys):
    rc, _, err = fit_case(tmp_path, capsys, _case("missing-code-modality"))
    assert rc == 0, err
    n_dots = len(cases.clean_rows(0)[::3])
    assert re.search(rf"warning: column 'region': the value '\.' \({n_dots} rows\) is a common code for a missing value"
                     r".*--na-values \.", err), err
    n_f = sum(r[3] == "F" for r in cases.clean_rows(1))
    assert re.search(rf"warning: column 'sex': the value '-9' \({n_f} rows\).*--na-values -9", err), err


def test_same_data_two_names(tmp_path, capsys):
    rc, _, err = fit_case(tmp_path, capsys, _case("same-data-two-names"))
    assert rc == 0, err
    assert f"warning: silos 'a' and 'c' hold identical data ({cases.N_ROWS} rows" in err, err


# -- the writer discipline -----------------------------------------------------------------------------------------
HOLD = ("import sys, time; from pathlib import Path; from vcmc.outputs import lock; "
        "lock.acquire(Path(sys.argv[1]), 'vcmc fit (test)'); print('held', flush=True); time.sleep(600)")


def _holder(folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([PY, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_out_locked(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    proc = _holder(out)
    try:
        _no_sampling(monkeypatch)
        for argv in (("fit", *write_files(tmp_path, cases.base()), "--out", str(out), *FAST),
                     ("report", str(out))):
            rc, _, err = _main(capsys, *argv)
            assert rc == 1 and re.search(rf"another vcmc run is writing there \(process {proc.pid}, vcmc fit "
                                         r"\(test\)", err), err
        assert not (out / ".vcmc-run.json").exists()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_stale_lock(tmp_path, capsys):
    out = tmp_path / "out"
    proc = _holder(out)
    proc.send_signal(signal.SIGKILL)          # killed: its lock file stays, its lock goes with the process
    proc.wait()
    proc.stdout.close()
    assert (out / ".vcmc-lock").exists()
    rc, _, err = _fit(tmp_path, capsys)
    assert rc == 0, err


def test_leftover_temp_files(tmp_path, capsys):
    rc, _, err = _fit(tmp_path, capsys)
    assert rc == 0, err
    out = tmp_path / "out"
    # what a kill during the atomic writes leaves: hidden temporary files, one with row-level memberships
    left = [out / ".memberships.k2j4.tmp.csv", out / ".result.x1.tmp.json", out / "silo-state" / ".a-1.tmp.npz"]
    shutil.copy(out / "memberships.csv", left[0])
    for p in left[1:]:
        p.write_text("partial")
    rc, _, err = _fit(tmp_path, capsys)
    assert rc == 0, err
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]


@pytest.mark.slow
def test_sigterm_sighup(tmp_path):
    files = write_files(tmp_path, cases.base())
    for sig in (signal.SIGTERM, signal.SIGHUP):
        out = tmp_path / f"out-{sig.name}"
        proc = subprocess.Popen([PY, "-m", "vcmc.cli", "fit", *files, "--out", str(out), "--iterations", "400000",
                                 "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600          # a hang guard only: a loaded machine starts slowly
        while not (out / ".vcmc-run.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=300)   # a hang guard: the run ends within seconds of the signal
        assert proc.returncode == 130, stderr
        assert re.search(r"vcmc fit: interrupted; kept the finished sampling of [0-3] of 3 silo\(s\) .*resume with: "
                         r"vcmc fit .* --seed 1", stderr), stderr
        assert not [p for p in out.rglob("*") if ".tmp" in p.name]


@pytest.fixture
def fitted(tmp_path, capsys):
    files = write_files(tmp_path, cases.base())
    assert run(capsys, *files, "--out", str(tmp_path / "fit"), *FAST)[0] == 0
    new = tmp_path / "new.csv"
    new.write_text(cases.csv_text(cases.clean_rows(5)[:20]))
    return tmp_path / "fit", new, files


def test_predict_into_fit(fitted, capsys):
    fit, new, _ = fitted
    before = _snapshot(fit)
    for extra in ((), ("--overwrite",)):
        rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(fit), *extra)
        assert rc == 1 and "is the fit's own folder" in err, err
    assert _snapshot(fit) == before


def test_predict_another_run(fitted, capsys, tmp_path):
    fit, new, _ = fitted
    out = tmp_path / "scored"
    assert _main(capsys, "predict", str(fit), str(new), "--out", str(out))[0] == 0
    assert _main(capsys, "predict", str(fit), str(new), "--out", str(out))[0] == 0     # the same: resumes
    first = _snapshot(out)
    rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(out), "--draws", "3")
    assert rc == 1 and "holds the results of another run of vcmc predict" in err and "--overwrite" in err, err
    assert _snapshot(out) == first
    assert _main(capsys, "predict", str(fit), str(new), "--out", str(out), "--draws", "3", "--overwrite")[0] == 0
    # predict into another fit's folder: refused even with --overwrite
    rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(tmp_path / "other-fit"), "--overwrite")
    assert rc == 0
    shutil.copy(fit / "posterior.nc", tmp_path / "other-fit" / "posterior.nc")
    rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(tmp_path / "other-fit"), "--overwrite")
    assert rc == 1 and "holds the results of a vcmc fit" in err, err


def test_mixed_result_set(fitted, capsys, tmp_path):
    fit, new, files = fitted
    assert run(capsys, *files, "--out", str(tmp_path / "fit2"), "--iterations", "200", "--seed", "2")[0] == 0
    assert (tmp_path / "fit2" / "profiles.csv").read_bytes() != (fit / "profiles.csv").read_bytes()
    shutil.copy(tmp_path / "fit2" / "profiles.csv", fit / "profiles.csv")
    for argv in (("predict", str(fit), str(new), "--out", str(tmp_path / "p")), ("report", str(fit))):
        rc, _, err = _main(capsys, *argv)
        assert rc == 1 and "its result files are not one run's: profiles.csv is not the file that run wrote" \
            in err, err
    assert not (fit / "report.html").exists()


def test_unfinished_run(fitted, capsys, tmp_path):
    fit, new, _ = fitted
    manifest = json.loads((fit / ".vcmc-run.json").read_text())
    del manifest["files"]                         # what a kill between the renames of a run leaves
    (fit / ".vcmc-run.json").write_text(json.dumps(manifest))
    for argv in (("predict", str(fit), str(new), "--out", str(tmp_path / "p")), ("report", str(fit))):
        rc, _, err = _main(capsys, *argv)
        assert rc == 1 and "did not finish writing its results" in err and "vcmc fit" in err, err


def test_truncated_posterior(fitted, capsys, tmp_path):
    fit, new, _ = fitted
    data = (fit / "posterior.nc").read_bytes()
    (fit / "posterior.nc").write_bytes(data[: len(data) // 2])
    rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(tmp_path / "p"))
    assert rc == 1 and "posterior.nc is not the file that run wrote" in err, err
    (fit / ".vcmc-run.json").unlink()             # a folder without a manifest (written by the API): read as is
    rc, _, err = _main(capsys, "predict", str(fit), str(new), "--out", str(tmp_path / "p"))
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(r"posterior\.nc cannot be read as the fit's posterior draws .*damaged or truncated", err), err


def test_out_is_input_folder(tmp_path, capsys):
    files = write_files(tmp_path, cases.base(**{"schema.json": cases.SCHEMA}))
    mine = (tmp_path / "schema.json").read_bytes()
    for extra in ((), ("--overwrite", "--seed", "2")):
        rc, _, err = run(capsys, *files, "--out", str(tmp_path), "--iterations", "200", *(extra or ("--seed", "1")))
        assert rc == 0, err
        assert (tmp_path / "schema.json").read_bytes() == mine
    assert (tmp_path / "result.json").exists()


def test_repeat_without_seed(tmp_path, capsys, monkeypatch):
    files = write_files(tmp_path, cases.base())
    out = tmp_path / "out"
    assert run(capsys, *files, "--out", str(out), "--iterations", "200")[0] == 0
    first = _snapshot(out)
    seed = json.loads((out / "result.json").read_text())["seed"]
    _no_sampling(monkeypatch)
    rc, _, err = run(capsys, *files, "--out", str(out), "--iterations", "200")
    assert rc == 0, err
    assert f"resuming the run in {out} with the seed it drew ({seed})" in err
    assert {k: v for k, v in _snapshot(out).items() if k.endswith(".csv")} == \
        {k: v for k, v in first.items() if k.endswith(".csv")}


def test_ess_unreachable(tmp_path, capsys, monkeypatch):
    _no_sampling(monkeypatch)
    rc, _, err = run(capsys, *write_files(tmp_path, cases.base()), "--out", str(tmp_path / "out"),
                     "--iterations", "4000", "--seed", "1")
    # 4,000 iterations, 2,000 burn-in, thin 5: 400 draws, so the target ESS of 400 cannot be met
    assert "warning: with 4000 iterations a silo keeps 400 draws after burn-in" in err, err
    assert "ESS cannot reach the target 400" in err.split("the sampler ran")[0]


def test_iterations_auto_names_ess(tmp_path, capsys):
    rc, _, err = run(capsys, *write_files(tmp_path, cases.base()), "--out", str(tmp_path / "out"), "--seed", "1",
                     "--iterations", "auto", "--max-iterations", "600", "--burn-in", "300")
    assert rc == 0, err
    local = result_of(tmp_path)["diagnostics"]["local"]
    for silo, d in local.items():
        ess = min(d[k] for k in ("ess_bulk_log_posterior", "ess_tail_log_posterior", "ess_bulk_pi_min",
                                 "ess_tail_pi_min"))
        assert ess < 400                                  # 60 draws kept: ESS is what fails
        line = next(w for w in err.splitlines() if f"silo {silo!r}: the chains did not converge" in w)
        assert f"ESS {ess:.0f} < 400" in line, line
        assert ("R-hat" in line.split("converge:")[1]) == (max(d["rhat_log_posterior"], d["rhat_pi_max"]) > 1.01)


def test_console_warnings(tmp_path, capsys):
    # a silo unlike the others (its own modalities of 'region'), short chains: one-cluster silo, poor
    # convergence; the warnings name the command that shows more
    files = write_files(tmp_path, cases.base(**{"c.csv": cases._recoded(2, 1, {"north": "west", "south": "west",
                                                                                "east": "west"})}))
    rc, _, err = run(capsys, *files, "--out", str(tmp_path / "out"), "--iterations", "300", "--seed", "1",
                     "--min-cluster-size", "5")
    assert rc == 0, err
    result = result_of(tmp_path)
    local = result["diagnostics"]["local"]
    not_converged = [s for s, d in local.items() if d["ess_bulk_log_posterior"] < 400]
    assert not_converged                               # 300 iterations: 30 draws, ESS < 400 for every silo
    for s in not_converged:
        assert re.search(rf"warning: silo '{s}' did not converge \(.*ESS \d+ < 400.*see `vcmc report "
                         rf"{re.escape(str(tmp_path / 'out'))}`", err), err
    ppc = result["diagnostics"].get("ppc") or {}
    for check in ("prevalence", "pairs"):
        p = (ppc.get(check) or {}).get("p_value")
        said = "modality prevalences" if check == "prevalence" else "pairs of modalities"
        assert (p is not None and p < 0.05) == (f"predictive check of {said} failed" in err)
    sizes = {s: [c["size_per_silo"][s] for c in result["clusters"]] for s in result["silos"]}
    alone = [s for s, n in sizes.items() if max(n) == sum(n)]
    if sum(1 for c in result["clusters"] if c["size"]) > 1:
        for s in alone:
            assert f"warning: silo '{s}': all its {sum(sizes[s])} rows fall into one cluster" in err


def test_simulate_another_run(tmp_path, capsys):
    out = tmp_path / "sim"
    sim = ("simulate", "--design", "nested", "--separability", "easy", "--out", str(out), "--n-per-silo", "30")
    assert _main(capsys, *sim, "--seed", "1")[0] == 0
    assert _main(capsys, *sim, "--seed", "1")[0] == 0                       # the same simulation: rewritten
    first = _snapshot(out)
    rc, _, err = _main(capsys, *sim, "--seed", "2")
    assert rc == 1 and "holds another simulation (design 'nested', seed 1)" in err and "--overwrite" in err, err
    assert _snapshot(out) == first
    assert _main(capsys, *sim, "--seed", "2", "--overwrite")[0] == 0
    assert json.loads((out / "truth.json").read_text())["seed"] == 2
    # held like every output folder
    proc = _holder(out)
    try:
        rc, _, err = _main(capsys, *sim, "--seed", "2")
        assert rc == 1 and "another vcmc run is writing there" in err
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _compare(capsys, out, *extra, files):
    return _main(capsys, "compare", *files, "--out", str(out), "--k", "1-2", "--starts", "1", "--waic-draws", "0",
                 *extra)


def test_compare_another_run(tmp_path, capsys):
    files = write_files(tmp_path, cases.base())
    out = tmp_path / "cmp"
    rc, _, err = _compare(capsys, out, files=files)
    assert rc == 0, err
    manifest = json.loads((out / ".vcmc-run.json").read_text())
    assert set(manifest["files"]) == {"comparison.csv", "comparison.png"}            # the sealed result set
    seed = manifest["seed"]
    first = _snapshot(out)
    # the same command again (no --seed): it resumes with the seed it drew, the same results
    rc, _, err = _compare(capsys, out, files=files)
    assert rc == 0 and f"resuming the run in {out} with the seed it drew ({seed})" in err, err
    assert (out / "comparison.csv").read_bytes() == first["comparison.csv"]
    first = _snapshot(out)
    # another comparison (other K) is refused, the folder unchanged; --overwrite replaces it
    rc, _, err = _compare(capsys, out, "--k", "3", files=files)
    assert rc == 1 and "holds the results of another run" in err and "--overwrite" in err, err
    assert _snapshot(out) == first
    rc, _, err = _compare(capsys, out, "--k", "3", "--overwrite", files=files)
    assert rc == 0, err
    assert pd.read_csv(out / "comparison.csv").k.tolist() == [3]
    # a fit's folder is another run's results too; and --out is held like every output folder
    rc, _, err = _fit(tmp_path, capsys, "fit")
    assert rc == 0, err
    fit_files = _snapshot(tmp_path / "fit")
    rc, _, err = _compare(capsys, tmp_path / "fit", files=files)
    assert rc == 1 and "holds the results of another run" in err, err
    assert _snapshot(tmp_path / "fit") == fit_files
    proc = _holder(out)
    try:
        rc, _, err = _compare(capsys, out, "--k", "3", files=files)
        assert rc == 1 and "another vcmc run is writing there" in err, err
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_compare_out_checks(tmp_path, capsys):
    files = write_files(tmp_path, cases.base())
    (tmp_path / "afile").write_text("x")
    rc, _, err = _compare(capsys, tmp_path / "afile", files=files)
    assert rc == 1 and "is a file, not a folder" in err, err
    # the temporary files of a killed comparison are removed by the next run
    out = tmp_path / "cmp"
    out.mkdir()
    (out / ".comparison.abc123.tmp.csv").write_text("k\n1\n")
    rc, _, err = _compare(capsys, out, files=files)
    assert rc == 0, err
    assert not list(out.glob(".*.tmp*"))


def test_study_another_run(tmp_path, capsys):
    out = tmp_path / "study"
    study = ("study", "--out", str(out), "--methods", "fed-kmodes", "--scenarios", "non-nested/easy",
             "--replicates", "1", "--n-per-silo", "60", "--jobs", "1", "--no-figures")
    rc, _, err = _main(capsys, *study, "--seed", "1")
    assert rc == 0, err
    cell = out / "cells" / "non_nested-easy" / "rep-0000.json"
    inode = cell.stat().st_ino
    rc, printed, err = _main(capsys, *study, "--seed", "1")                # the same study resumes
    assert rc == 0 and "0 of 1 cells computed" in printed and cell.stat().st_ino == inode, err
    before = {k: v for k, v in _snapshot(out).items() if k.startswith("cells")}
    rc, _, err = _main(capsys, *study, "--seed", "2")                      # another study: refused, kept
    assert rc == 1 and "holds another study (seed 1" in err and "--overwrite" in err, err
    assert {k: v for k, v in _snapshot(out).items() if k.startswith("cells")} == before
    assert json.loads((out / "study.json").read_text())["root_seed"] == 1
    rc, _, err = _main(capsys, *study, "--seed", "2", "--overwrite")
    assert rc == 0, err
    assert json.loads((out / "study.json").read_text())["root_seed"] == 2
    assert len(json.loads((out / "study.json").read_text())["runs"]) == 1   # the other study's record is gone
    assert json.loads(cell.read_text())["root_seed"] == 2
    # a fit's folder is another command's results for a study, and a study's folder for a fit
    rc, _, err = _fit(tmp_path, capsys, "fit")
    assert rc == 0, err
    fit_files = _snapshot(tmp_path / "fit")
    rc, _, err = _main(capsys, "study", *study[1:2], str(tmp_path / "fit"), *study[3:], "--seed", "1")
    assert rc == 1 and "holds the results of another vcmc command" in err, err
    assert _snapshot(tmp_path / "fit") == fit_files
    rc, _, err = _fit(tmp_path, capsys, "study")
    assert rc == 1 and "holds the results of another run" in err and "study.json" in err, err


def _report_of_fit(tmp_path, capsys, monkeypatch):
    """A fit and its report, with the figures the report drew (matplotlib objects, before they become PNG)."""
    from vcmc.report import figures

    drawn = {}
    real = figures.convergence_figure

    def keep(*args, **kwargs):
        drawn["convergence"] = real(*args, **kwargs)
        return drawn["convergence"]

    monkeypatch.setattr(figures, "convergence_figure", keep)
    rc, _, err = _fit(tmp_path, capsys)
    assert rc == 0, err
    rc, _, err = _main(capsys, "report", str(tmp_path / "out"))
    assert rc == 0, err
    return (tmp_path / "out" / "report.html").read_text(encoding="utf-8"), drawn


def test_report_convergence_legend(tmp_path, capsys, monkeypatch):
    _, drawn = _report_of_fit(tmp_path, capsys, monkeypatch)
    fig = drawn["convergence"]
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [lg for ax in fig.axes if (lg := ax.get_legend()) is not None]
    assert legends
    for legend in legends:                        # inside the saved canvas: nothing clipped
        box, canvas = legend.get_window_extent(renderer), fig.bbox
        assert canvas.x0 - 0.5 <= box.x0 and box.x1 <= canvas.x1 + 0.5, (box, canvas)
        assert canvas.y0 - 0.5 <= box.y0 and box.y1 <= canvas.y1 + 0.5, (box, canvas)


def test_report_k_posterior(tmp_path, capsys, monkeypatch):
    page, _ = _report_of_fit(tmp_path, capsys, monkeypatch)
    start = page.index('id="k-posterior"')
    section = re.sub(r"<[^>]+>", " ", page[start:page.index("</section>", start)])
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["diagnostics"]["rounds_plan"]["rounds"] > 1          # the default: the rounds (vcmc.rounds.plan)
    # the rounds' posterior of K is the pooled chain's, a measured distribution (the one-shot pass's point
    # mass at the matching's K is tests/report/test_figures.py's)
    assert "is fixed by the matching" not in section, section
    assert "the pooled sampler's number of occupied components over its kept draws" in section
    assert "Per silo (local number of clusters)" in section


def test_readme_activates(tmp_path):
    """After the README's first command only .venv/bin/vcmc exists: its command-line section activates the
    environment first, and that makes `vcmc` found in a shell that had none (tests/test_readme.py runs it all)."""
    import os

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    bash = re.findall(r"^```bash\n(.*?)^```", readme, re.S | re.M)
    commands = [b for b in bash[1:] if "pip install" not in b]
    assert commands[0].splitlines()[0] == "source .venv/bin/activate"
    assert all(line.startswith(("vcmc ", "source ")) for b in commands for line in b.strip().splitlines())
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip("this interpreter is not a virtual environment's")
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "vcmc").exists())
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PATH": path}
    bare = subprocess.run(["bash", "-c", "vcmc --help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bare.returncode == 127                 # the user's shell before the README's line
    done = subprocess.run(["bash", "-c", f"{commands[0].splitlines()[0]} && vcmc --help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "usage: vcmc" in done.stdout, done.stderr


# every method of vcmc.methods and every matching of vcmc fit; fed-kmodes has no probabilities (README table)
METHOD_RUNS = [(m, ()) for m in ("vcmc", "consensus", "full-mcmc", "fedmerdel", "discgs")] + [
    ("vcmc", ("--matching", m)) for m in ("ball", "hungarian", "min-divergence")] + [
    ("fed-kmodes", ("--clusters", "2"))]


@pytest.mark.slow
@pytest.mark.parametrize(("method", "extra"), METHOD_RUNS, ids=[" ".join((m, *e)) for m, e in METHOD_RUNS])
def test_method_files(tmp_path, capsys, method, extra):
    from vcmc import methods

    assert {m for m, _ in METHOD_RUNS} == set(methods.METHODS)
    rc, _, err = _fit(tmp_path, capsys, "out", "--method", method, *extra)
    assert rc == 0, err
    out = tmp_path / "out"
    assign = pd.read_csv(out / "assignments.csv")
    assert len(assign) == 3 * cases.N_ROWS
    if method == "fed-kmodes":                    # K-modes gives hard labels only: nothing is faked
        assert list(assign.columns) == ["silo", "row", "cluster"]
        assert not (out / "memberships.csv").exists()
        return
    member = pd.read_csv(out / "memberships.csv")
    assert list(assign.columns) == ["silo", "row", "cluster", "probability"]
    k = json.loads((out / "result.json").read_text())["n_global_clusters"]
    assert list(member.columns) == ["silo", "row", *(f"p_{c}" for c in range(1, k + 1))]
    p = member[[f"p_{c}" for c in range(1, k + 1)]].to_numpy()
    assert len(member) == len(assign)
    assert (member[["silo", "row"]].to_numpy() == assign[["silo", "row"]].to_numpy()).all()
    assert abs(p.sum(axis=1) - 1).max() < 1e-9
    # the hard label is the row's most probable cluster and its probability is that membership
    assert (p[range(len(p)), assign.cluster - 1] == assign.probability).all()
    assert (assign.probability == p.max(axis=1)).all()


def test_score_silo_list(tmp_path):
    from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

    from vcmc.data import read_silos
    from vcmc.estimator import FederatedLatentClassModel

    files = write_files(tmp_path, {f"s{i}.csv": cases.clean(i) for i in range(4)})
    silos = read_silos(files)
    model = FederatedLatentClassModel(n_components=5, n_iter=200, random_state=1)
    scores = cross_val_score(model, silos, cv=KFold(2), error_score="raise")
    assert scores.shape == (2,) and all(-6 < s < 0 for s in scores), scores   # nats per row, 4 variables
    grid = GridSearchCV(model, {"beta": [0.5, 1.0]}, cv=KFold(2), error_score="raise").fit(silos)
    assert all(abs(v) < 6 for v in grid.cv_results_["mean_test_score"])
    # the score of a list is that of its rows pooled
    fitted = model.fit(silos[:2])
    n = [s.n_rows for s in silos[2:]]
    pooled = sum(fitted.score(s) * k for s, k in zip(silos[2:], n, strict=True)) / sum(n)
    assert abs(fitted.score(silos[2:]) - pooled) < 1e-9


# -- vcmc schema ---------------------------------------------------------------------------------------------------
def test_schema_command(tmp_path, capsys):
    files = write_files(tmp_path, cases.base(**{"c.csv": cases.edited(2, 5, 1, "west")}))
    out = tmp_path / "schema.json"
    rc, stdout, err = _main(capsys, "schema", *files, "--out", str(out))
    assert rc == 0, err
    from vcmc.data import Schema

    schema = Schema.from_json(out)
    assert schema["region"].modalities == ("east", "north", "south", "west")
    assert "column 'region': 'west' in 1 row(s)" in err and "keeping them is your decision" in err
    # the written schema is what vcmc fit takes (the rare modality is then the user's decision)
    rc, _, err = run(capsys, *files, "--out", str(tmp_path / "out"), *FAST, "--schema", str(out))
    assert rc == 0, err
    # an existing schema (maybe reviewed by hand) is kept
    out.write_text(out.read_text().replace('"west"', '"west", "other"'))
    kept = out.read_bytes()
    rc, _, err = _main(capsys, "schema", *files, "--out", str(out))
    assert rc == 1 and "--overwrite" in err and out.read_bytes() == kept


def test_schema_command_minimum_is_named_for_what_it_is(tmp_path, capsys):
    """--min-modality-rows: the fewest rows a modality is seen in; --min-cluster-size, its first name, still
    works with a deprecation warning."""
    files = write_files(tmp_path, cases.base(**{"c.csv": cases.edited(2, 5, 1, "west")}))
    rc, _, err = _main(capsys, "schema", *files, "--out", str(tmp_path / "a.json"), "--min-modality-rows", "1")
    assert rc == 0 and "'west'" not in err and "deprecated" not in err, err
    rc, _, err = _main(capsys, "schema", *files, "--out", str(tmp_path / "b.json"), "--min-modality-rows", "2")
    assert rc == 0 and "column 'region': 'west' in 1 row(s)" in err and "--min-modality-rows 2" in err, err
    rc, _, err = _main(capsys, "schema", *files, "--out", str(tmp_path / "c.json"), "--min-cluster-size", "2")
    assert rc == 0 and "deprecated" in err and "--min-modality-rows" in err and "'west' in 1 row(s)" in err, err
    rc, _, err = _main(capsys, "schema", *files, "--out", str(tmp_path / "d.json"), "--min-cluster-size", "2",
                       "--min-modality-rows", "2")
    assert rc == 1 and "alone" in err, err


def test_schema_check(tmp_path, capsys):
    files = write_files(tmp_path, cases.base(**{"b.csv": cases.edited(1, 3, 1, "nroth"), "s.json": cases.SCHEMA}))
    rc, _, err = _main(capsys, "schema", *files, "--check", str(tmp_path / "s.json"))
    assert rc == 1 and re.search(r"b\.csv, column 'region': value\(s\) 'nroth' \(data row\(s\) 3", err), err
    files = write_files(tmp_path, cases.base())
    rc, stdout, err = _main(capsys, "schema", *files, "--check", str(tmp_path / "s.json"))
    assert rc == 0 and "every value is a modality" in stdout


def test_help_real_defaults(capsys):
    for command in ("fit", "predict", "report", "schema", "simulate"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "(default: None)" not in text and "(default: False)" not in text, command
        if command == "fit":
            assert "a random seed is drawn" in text and "--method {" in text and "Variational Consensus" in text
