"""The catalogue through the command line: every case of ``cases.py``, one test each, as a user runs it.

Numbers asserted here come from how each case's files are built (e.g. 15 padded cells, 12 "NA" cells),
never from the program's own output.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vcmc.cli import main

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402

FAST = ("--iterations", "200", "--seed", "1")
PY = sys.executable


def write_files(tmp: Path, files: dict) -> list[str]:
    """Write a case's files; return the CSV paths to give to vcmc fit (None: given but absent)."""
    csvs = []
    for name, text in files.items():
        p = tmp / name
        if name.endswith(".csv"):
            csvs.append(str(p))
        if text is None:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")
    return sorted(csvs)


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["fit", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def fit_case(tmp_path, capsys, case, *extra):
    csvs = write_files(tmp_path, case.files)
    return run(capsys, *csvs, "--out", str(tmp_path / "out"), *FAST, *case.args, *extra)


def result_of(tmp_path) -> dict:
    return json.loads((tmp_path / "out" / "result.json").read_text())


# -- the data cases ----------------------------------------------------------------------------------------------
FAILING = [c for c in cases.DATA_CASES if c.behaviour in ("error", "refusal")]


@pytest.mark.parametrize("case", FAILING, ids=[c.id for c in FAILING])
def test_data_case_stops_with_its_message_before_any_sampling(tmp_path, capsys, case, monkeypatch):
    import vcmc.mcmc.apply as apply_mod

    def no_sampling(*a, **k):
        raise AssertionError("the sampler ran")

    monkeypatch.setattr(apply_mod, "run_apply_step", no_sampling)
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 1, err
    assert err.startswith("vcmc fit: error: ") and err.count("\n") == 1, err
    assert re.search(case.match, err), err
    assert not (tmp_path / "out" / "result.json").exists()


def test_strip_whitespace(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "strip-whitespace")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    assert data["normalisation"] == {"strip_whitespace": True, "case_insensitive": False}
    padded = [r[2] for r in cases.clean_rows(1)[0::4]]            # the cells the case padded
    expected = {(f" {v} ", v): padded.count(v) for v in set(padded)}
    got = {(d["from"], d["to"]): d["cells"] for d in data["normalised"] if d["silo"] == "b"}
    assert got == expected and all(d["silo"] == "b" for d in data["normalised"])
    assert "cell(s) normalised as asked" in err
    prof = pd.read_csv(tmp_path / "out" / "profiles.csv", dtype=str)
    assert sorted(prof.loc[prof.variable == "stage", "modality"].unique()) == ["1", "2", "3"]


def test_case_insensitive(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "case-insensitive")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    assert data["normalisation"]["case_insensitive"] is True
    smoker = [r[0] for r in cases.clean_rows(1)[::2]]            # the cells the case capitalised
    expected = {(v.capitalize(), v): smoker.count(v) for v in set(smoker)}
    assert {(d["from"], d["to"]): d["cells"] for d in data["normalised"]
            if d["silo"] == "b" and d["column"] == "smoker"} == expected
    # an inferred modality is the folded label, in every column: 'F' and 'M' are recorded as 'f' and 'm'
    sex = [r[3] for i in range(3) for r in cases.clean_rows(i)]
    assert sum(d["cells"] for d in data["normalised"] if d["column"] == "sex") == len(sex)
    prof = pd.read_csv(tmp_path / "out" / "profiles.csv", dtype=str)
    assert sorted(prof.loc[prof.variable == "smoker", "modality"].unique()) == ["no", "yes"]
    assert sorted(prof.loc[prof.variable == "sex", "modality"].unique()) == ["f", "m"]


def test_rare_modality_with_schema(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "rare-modality-with-schema")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    assert data["schema"]["source"].endswith("schema.json (beside the files)")
    prof = pd.read_csv(tmp_path / "out" / "profiles.csv", dtype=str)
    assert "west" in set(prof.loc[prof.variable == "region", "modality"])


def test_schema_recorded(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "schema-recorded")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    from vcmc.data import Schema

    assert data["schema"] == {"source": f"{tmp_path / 'schema.json'} (beside the files)",
                              "fingerprint": Schema.from_json(cases.SCHEMA).fingerprint()}
    # and an inferred schema says so
    shutil.rmtree(tmp_path / "out")
    (tmp_path / "schema.json").unlink()
    assert run(capsys, *write_files(tmp_path, cases.base()), "--out", str(tmp_path / "out"), *FAST)[0] == 0
    assert result_of(tmp_path)["data"]["schema"]["source"] == "inferred from the files"


def test_na_values(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "na-values")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    assert data["na_values"] == ["", "NA"]
    assert data["normalised"] == [{"silo": "a", "column": "region", "from": "NA", "to": None,
                                   "cells": len(range(0, cases.N_ROWS, 5))}]


def test_na_modality_in_schema(tmp_path, capsys):
    case = next(c for c in cases.DATA_CASES if c.id == "na-modality-in-schema")
    rc, _, err = fit_case(tmp_path, capsys, case)
    assert rc == 0, err
    data = result_of(tmp_path)["data"]
    assert data["na_values"] == [""] and data["normalised"] == []
    prof = pd.read_csv(tmp_path / "out" / "profiles.csv", dtype=str, keep_default_na=False)
    na = prof[(prof.variable == "region") & (prof.modality == "NA")]
    # 12 of 60 rows of every silo are region "NA": the estimate of that modality is far from 0 in a cluster
    assert len(na) >= 1 and na.estimate.astype(float).max() > 0.1


# -- the output folder ------------------------------------------------------------------------------------------
def _files(tmp_path):
    return write_files(tmp_path, cases.base())


def _fast_error(capsys, *argv):
    rc, _, err = run(capsys, *argv)
    return rc, err


#: What a refusal of --out or of a flag must not wait for: the samplers' compiled kernels and the analysis and
#: plotting libraries (their imports are most of a run's first seconds). Checked by what is imported, not by a
#: wall clock: a test must not depend on the machine being idle.
HEAVY = ("numba", "matplotlib", "xarray", "arviz", "sklearn", "vcmc.silo.sampler", "vcmc.pipeline")


def _imported_when_refused(*argv) -> tuple[int, list[str], str]:
    code = ("import sys, json; from vcmc.cli import main; rc = main(json.loads(sys.argv[1])); "
            f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))")
    done = subprocess.run([PY, "-c", code, json.dumps(["fit", *argv])], capture_output=True, text=True, timeout=600)
    rc, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return rc, heavy, done.stderr


def test_out_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("not a folder")
    rc, err = _fast_error(capsys, *_files(tmp_path), "--out", str(tmp_path / "taken"), *FAST)
    assert rc == 1 and "is a file, not a folder" in err
    assert (tmp_path / "taken").read_text() == "not a folder"
    # and as a user runs it, in a new process: refused before the samplers and the heavy libraries are imported
    rc, heavy, err = _imported_when_refused(*_files(tmp_path), "--out", str(tmp_path / "taken"), *FAST)
    assert rc == 1 and "is a file, not a folder" in err and heavy == [], (heavy, err)


@contextlib.contextmanager
def mounted_tmpfs(path: Path, options: str):
    """A small tmpfs (root only): a real read-only or full file system. Skips where mount is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_out_read_only(tmp_path, capsys):
    files = _files(tmp_path)
    ro = tmp_path / "ro"
    if os.geteuid() == 0:      # root writes through permission bits: a read-only file system is the real test
        ctx = mounted_tmpfs(ro, "size=1m,ro")
    else:
        ro.mkdir()
        ro.chmod(0o555)
        ctx = contextlib.nullcontext(ro)
    with ctx:
        rc, err = _fast_error(capsys, *files, "--out", str(ro / "results"), *FAST)
    assert rc == 1 and re.search(r"--out .*results: cannot write there \((Read-only file system|Permission "
                                 r"denied)\)", err), err


def test_out_empty(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, err = _fast_error(capsys, *_files(tmp_path), "--out", "", *FAST)
    assert rc == 1 and "--out must name a folder for the results; got ''" in err
    assert not (tmp_path / "result.json").exists()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_out_another_run(tmp_path, capsys):
    files = _files(tmp_path)
    out = str(tmp_path / "out")
    assert run(capsys, *files, "--out", out, *FAST)[0] == 0
    before = _snapshot(tmp_path / "out")
    rc, err = _fast_error(capsys, *files, "--out", out, "--iterations", "200", "--seed", "2")
    assert rc == 1 and "holds the results of another run" in err and "--overwrite" in err
    assert _snapshot(tmp_path / "out") == before


def test_out_overwrite(tmp_path, capsys):
    files = _files(tmp_path)
    out = tmp_path / "out"
    assert run(capsys, *files, "--out", str(out), *FAST)[0] == 0
    assert (out / "posterior.nc").exists()
    rc, _, err = run(capsys, *files, "--out", str(out), "--method", "fed-kmodes", "--n-clusters", "2",
                     "--seed", "3", "--overwrite")
    assert rc == 0, err
    result = json.loads((out / "result.json").read_text())
    assert result["method"] == "fed-kmodes" and result["seed"] == 3
    assert not (out / "posterior.nc").exists()     # fed-kmodes has no draws: the old file would not match


def test_out_same_run_resumes(tmp_path, capsys, monkeypatch):
    files = _files(tmp_path)
    out = tmp_path / "out"
    assert run(capsys, *files, "--out", str(out), *FAST)[0] == 0
    first = {k: v for k, v in _snapshot(out).items() if k.endswith(".csv")}
    import vcmc.mcmc.apply as apply_mod

    monkeypatch.setattr(apply_mod, "run_apply_step", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the sampler ran again")))
    rc, _, err = run(capsys, *files, "--out", str(out), *FAST)
    assert rc == 0, err
    assert {k: v for k, v in _snapshot(out).items() if k.endswith(".csv")} == first


def test_out_no_space(tmp_path, capsys, monkeypatch):
    import vcmc.outputs.space as space

    real = shutil.disk_usage
    monkeypatch.setattr(space.shutil, "disk_usage", lambda p: real(p)._replace(free=200_000))
    import vcmc.mcmc.apply as apply_mod

    monkeypatch.setattr(apply_mod, "run_apply_step", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the sampler ran")))
    rc, err = _fast_error(capsys, *_files(tmp_path), "--out", str(tmp_path / "out"),
                                   "--iterations", "20000", "--seed", "1")
    assert rc == 1 and re.search(r"0\.2 MB free, the run writes up to about [\d.]+ MB \(posterior\.nc", err), err


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([PY, "-m", "vcmc.cli", "fit", *args], capture_output=True, text=True, env=env,
                          timeout=600, **kw)


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*") if ".tmp" in p.name)


def _no_result_files(out: Path) -> list[str]:
    return sorted(n for n in ("result.json", "assignments.csv", "profiles.csv", "posterior.nc") if (out / n).exists())


@pytest.mark.slow
def test_full_disk(tmp_path):
    """A real full disk (a 64 MB tmpfs filled up after the checks of --out passed, while the silos sample):
    one clear error, exit code 1, no temporary or truncated file, and no file of a half-written result."""
    files = _files(tmp_path)
    disk = tmp_path / "disk"
    with mounted_tmpfs(disk, "size=64m"):
        out = disk / "out"
        proc = subprocess.Popen([PY, "-m", "vcmc.cli", "fit", *files, "--out", str(out), "--iterations", "40000",
                                 "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not (out / ".vcmc-run.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as fh:   # fill the disk to the last byte
            while True:
                fh.write(b"\0" * 65536)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 1, stderr
        assert re.search(r"vcmc fit: error: cannot write the results into .*: the disk is full", stderr), stderr
        assert "Traceback" not in stderr and "Segmentation" not in stderr
        assert _leftovers(out) == [] and _no_result_files(out) == []
        # with room again, the same command writes complete results
        (disk / "filler").unlink()
        again = _cli(*files, "--out", str(out), "--iterations", "40000", "--seed", "1")
        assert again.returncode == 0, again.stderr
        import xarray as xr

        with xr.open_datatree(out / "posterior.nc", engine="h5netcdf") as tree:
            assert tree["posterior"]["pi"].shape[-1] >= 1


def _limited(limit: int):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return set_limit


def test_file_size_limit(tmp_path):
    """RLIMIT_FSIZE (no privilege needed): posterior.nc grows past 32 KB and its write fails with EFBIG
    while the CSV files fit: nothing of the result is left (all or nothing), and no temporary file."""
    files = _files(tmp_path)
    out = tmp_path / "out"
    done = _cli(*files, "--out", str(out), "--iterations", "4000", "--seed", "1", preexec_fn=_limited(32_768))
    assert done.returncode == 1, done.stderr
    assert re.search(r"cannot write the results into .*: a file grew beyond the file-size limit", done.stderr)
    assert "the silos' finished sampling is kept" in done.stderr and "Traceback" not in done.stderr
    assert _leftovers(out) == [] and _no_result_files(out) == []


def test_full_disk_no_resume(tmp_path):
    files = _files(tmp_path)
    out = tmp_path / "out"
    done = _cli(*files, "--out", str(out), "--iterations", "4000", "--seed", "1", "--no-resume",
                preexec_fn=_limited(32_768))
    assert done.returncode == 1 and "with --no-resume the sampling was not kept" in done.stderr, done.stderr
    assert _leftovers(out) == [] and _no_result_files(out) == [] and not (out / "silo-state").exists()


# -- flags -------------------------------------------------------------------------------------------------------
def _flag_error(tmp_path, capsys, *flags) -> str:
    rc, _, err = run(capsys, *_files(tmp_path), "--out", str(tmp_path / "out"), "--seed", "1", *flags)
    assert rc == 1, err
    assert not (tmp_path / "out" / "result.json").exists()
    return err


def test_alpha_inf(tmp_path, capsys):
    assert "vcmc fit: error: --alpha must be a finite float > 0; got inf" in _flag_error(tmp_path, capsys,
                                                                                         "--alpha", "inf")


def test_beta_nan(tmp_path, capsys):
    assert "--beta must be finite and > 0 (a float or one per variable); got nan" in _flag_error(
        tmp_path, capsys, "--beta", "nan")


def test_seed_negative(tmp_path, capsys):
    err = _flag_error(tmp_path, capsys, "--seed", "-1")
    assert "--seed must be a whole number >= 0" in err and "Traceback" not in err


def test_thin_too_large(tmp_path, capsys):
    err = _flag_error(tmp_path, capsys, "--iterations", "200", "--thin", "100")
    assert "--thin must be at most (--iterations - --burn-in) / 2 = 50 so that at least 2 draws are kept" in err


def test_min_silos_too_many(tmp_path, capsys):
    assert "--min-silos 5 is more than the 3 silo(s) given" in _flag_error(tmp_path, capsys, "--min-silos", "5")


def test_min_silos_zero(tmp_path, capsys):
    assert "--min-silos must be a whole number >= 1" in _flag_error(tmp_path, capsys, "--min-silos", "0")


def test_jobs_zero(tmp_path, capsys):
    assert "--jobs must be a whole number >= 1" in _flag_error(tmp_path, capsys, "--jobs", "0")


def test_burn_in_too_long(tmp_path, capsys):
    err = _flag_error(tmp_path, capsys, "--iterations", "200", "--burn-in", "300")
    assert "--burn-in must be an int in [0, --iterations); got 300" in err


def test_iterations_zero(tmp_path, capsys):
    assert "--iterations must be an int >= 1; got 0" in _flag_error(tmp_path, capsys, "--iterations", "0")


def test_components_zero(tmp_path, capsys):
    assert "--components must be an int >= 1; got 0" in _flag_error(tmp_path, capsys, "--components", "0")


def test_level_out_of_range(tmp_path, capsys):
    assert "--level must be a float in [0.5, 1); got 1.5" in _flag_error(tmp_path, capsys, "--level", "1.5")


def test_summary_draws_one(tmp_path, capsys):
    err = _flag_error(tmp_path, capsys, "--summary-draws", "1")
    assert "--summary-draws must be 0 (every kept draw) or an int >= 2; got 1" in err, err


def test_set_bad_value(tmp_path, capsys):
    assert "--set sampler.n-iter must be an int; got 'many'" in _flag_error(tmp_path, capsys, "--set",
                                                                            "sampler.n-iter=many")


def test_min_cluster_size_negative(tmp_path, capsys):
    assert "--min-cluster-size must be an int >= 0; got -1" in _flag_error(tmp_path, capsys,
                                                                           "--min-cluster-size", "-1")


def test_na_values_empty(tmp_path, capsys):
    assert "--na-values: the empty cell is always missing" in _flag_error(tmp_path, capsys, "--na-values", "")


def test_fed_kmodes_without_k(tmp_path, capsys):
    assert "--method fed-kmodes needs --n-clusters K" in _flag_error(tmp_path, capsys, "--method", "fed-kmodes")


# -- processes, interruption, the silos' saved state -----------------------------------------------------------------
def _descendants(pid: int) -> dict[int, int]:
    """pid -> parent pid of every live descendant of ``pid``."""
    parent = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (p / "stat").read_text()
                parent[int(p.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = {}, [pid]
    while todo:
        q = todo.pop()
        for child, par in parent.items():
            if par == q and child not in out:
                out[child] = par
                todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def forty_silos(tmp_path: Path, n: int = 40) -> Path:
    rows = []
    for s in range(n):
        rows += [[f"s{s:02d}", *r] for r in cases.clean_rows(s, 40)]
    path = tmp_path / "pooled.csv"
    path.write_text(cases.csv_text(rows, ("site", *cases.COLUMNS)))
    return path


@pytest.mark.slow
def test_jobs_caps_workers(tmp_path):
    """--jobs 2 with 40 silos: the worker processes (children of the fork server) are never more than 2."""
    pooled = forty_silos(tmp_path)
    proc = subprocess.Popen([PY, "-m", "vcmc.cli", "fit", str(pooled), "--silo-column", "site", "--out",
                             str(tmp_path / "out"), "--iterations", "400", "--seed", "1", "--jobs", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    most, seen = 0, set()
    while proc.poll() is None:
        tree = _descendants(proc.pid)
        servers = [p for p in tree if "forkserver" in _cmdline(p) and tree[p] == proc.pid]
        workers = [p for p, par in tree.items() if par in servers]
        seen.update(workers)
        most = max(most, len(workers))
        time.sleep(0.02)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    assert "40 silos" in stdout
    assert 1 <= most <= 2 and len(seen) <= 2, (most, seen)


@pytest.mark.slow
def test_ctrl_c(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while silos sample in 2 worker
    processes: one line naming what was kept and the exact command that resumes; exit code 130; running that
    command finishes the run with the result of a run never interrupted."""
    rows = [r for i in range(40) for r in cases.clean_rows(i)]
    files = []
    for k in range(4):
        p = tmp_path / f"site{k}.csv"
        p.write_text(cases.csv_text(rows[k * 600:(k + 1) * 600]))
        files.append(str(p))
    out = tmp_path / "out"
    argv = ["fit", *files, "--out", str(out), "--iterations", "30000", "--jobs", "2"]
    # as a terminal starts a foreground command: SIGINT at its default, whatever this process does with it
    proc = subprocess.Popen([PY, "-m", "vcmc.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not [
            p for p in (out / "silo-state").glob("*.npz") if not p.name.startswith(".")]:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    # (on a loaded machine the signal may come after the last silo finished: then all 4 are kept)
    m = re.fullmatch(r"vcmc fit: interrupted; kept the finished sampling of ([1-4]) of 4 silo\(s\) in (.+); "
                     r"resume with: (vcmc fit .* --seed (\d+))", lines[0])
    assert m and m.group(2) == str(out / "silo-state"), stderr
    deadline = time.monotonic() + 30       # the workers exit with the interrupted run: wait for them to go
    while [p for p in _descendants(os.getpid()) if _cmdline(p).find(str(out)) >= 0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in _descendants(os.getpid()) if _cmdline(p).find(str(out)) >= 0]
    import shlex

    command = shlex.split(m.group(3))
    assert command[:2] == ["vcmc", "fit"] and command[2:-2] == argv[1:], command
    resumed = subprocess.run([PY, "-m", "vcmc.cli", *command[1:]], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert len([p for p in (out / "silo-state").glob("*.npz") if not p.name.startswith(".")]) == 4
    fresh = subprocess.run([PY, "-m", "vcmc.cli", *command[1:-4], "--out", str(tmp_path / "fresh"),
                            *command[-4:]], capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0, fresh.stderr
    assert (out / "assignments.csv").read_bytes() == (tmp_path / "fresh" / "assignments.csv").read_bytes()


def _state_file(out: Path, silo: str) -> Path:
    (path,) = (out / "silo-state").glob(f"{silo}-*.npz")
    return path


def test_state_of_another_seed(tmp_path, capsys):
    files = _files(tmp_path)
    assert run(capsys, *files, "--out", str(tmp_path / "one"), "--iterations", "200", "--seed", "1")[0] == 0
    assert run(capsys, *files, "--out", str(tmp_path / "two"), "--iterations", "200", "--seed", "2")[0] == 0
    _state_file(tmp_path / "two", "a").replace(_state_file(tmp_path / "one", "a"))
    (tmp_path / "one" / "result.json").unlink()
    rc, _, err = run(capsys, *files, "--out", str(tmp_path / "one"), "--iterations", "200", "--seed", "1")
    assert rc == 1
    assert re.search(r"silo 'a'.*the saved state .*one/silo-state/a-\w+\.npz was written for another run or silo "
                     r"\(seed '2' \(this run: '1'\)\).*Remove it, or run with --no-resume", err), err


def test_state_of_another_silo(tmp_path, capsys):
    files = _files(tmp_path)
    assert run(capsys, *files, "--out", str(tmp_path / "one"), *FAST)[0] == 0
    _state_file(tmp_path / "one", "b").replace(_state_file(tmp_path / "one", "a"))
    rc, _, err = run(capsys, *files, "--out", str(tmp_path / "one"), *FAST)
    assert rc == 1
    assert re.search(r"silo 'a'.*saved state .*silo-state/a-\w+\.npz was written for another run or silo \(silo "
                     r"'b' \(this run: 'a'\)", err), err


def test_state_damaged(tmp_path, capsys):
    files = _files(tmp_path)
    out = tmp_path / "one"
    assert run(capsys, *files, "--out", str(out), *FAST)[0] == 0
    first = (out / "assignments.csv").read_bytes()
    path = _state_file(out, "a")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["state.local.partition"] = arrays["state.local.partition"][::-1].copy()
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    done = _cli(*files, "--out", str(out), *FAST)
    assert done.returncode == 0, done.stderr
    assert re.search(r"silo 'a': the saved state .*a-\w+\.npz does not match its digest .*sampling again",
                     done.stderr), done.stderr
    assert (out / "assignments.csv").read_bytes() == first      # resampled with the same seed: the same result


def test_silo_column_rows(tmp_path, capsys):
    pooled = forty_silos(tmp_path, n=3)
    # interleave the sites, so that a silo's rows are not a block of the pooled file
    frame = pd.read_csv(pooled, dtype=str)
    order = np.argsort(np.arange(len(frame)) % 40, kind="stable")
    frame = frame.iloc[order].reset_index(drop=True)
    frame.to_csv(pooled, index=False)
    rc, _, err = run(capsys, str(pooled), "--silo-column", "site", "--out", str(tmp_path / "out"), *FAST)
    assert rc == 0, err
    assign = pd.read_csv(tmp_path / "out" / "assignments.csv", dtype={"silo": str})
    assert sorted(assign.row) == list(range(len(frame)))
    for site, rows in assign.groupby("silo").row:
        assert sorted(rows) == sorted(np.flatnonzero(frame.site.to_numpy() == site))


def test_state_not_writable(tmp_path):
    files = _files(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "silo-state").write_text("a file where the silos' state folder should be")
    done = _cli(*files, "--out", str(out), *FAST, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("could not save its state in") == 3 and (out / "result.json").exists()
