"""The study runner: seeds, saved cells, resume after a kill, shared apply steps, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import numpy as np
import pytest

from vcmc.exceptions import ConfigError
from vcmc.research.study.runner import (
    cell_path,
    cell_seed,
    data_seed,
    load_cells,
    method_seed,
    run_cell,
    run_study,
    simulate_cell,
)


def test_seeds_are_deterministic_and_distinct():
    a = cell_seed(7, "nested/easy", 3).generate_state(4)
    b = cell_seed(7, "nested/easy", 3).generate_state(4)
    assert np.array_equal(a, b)
    others = [cell_seed(7, "nested/easy", 4), cell_seed(7, "nested/poor", 3), cell_seed(8, "nested/easy", 3)]
    for o in others:
        assert not np.array_equal(a, o.generate_state(4))
    # user spellings of a scenario name the same cell
    assert data_seed(7, "non-nested/easy", 0) == data_seed(7, "non_nested/easy", 0)
    assert method_seed(7, "nested/easy", 0, "vcmc-ball") != method_seed(7, "nested/easy", 0, "full-mcmc")


def test_one_cell_rerun_alone_gets_the_same_data(helpers):
    prof = helpers.tiny_profile()
    d1 = simulate_cell("nested/poor", 2, profile=prof, root_seed=5)
    d2 = simulate_cell("nested/poor", 2, profile=prof, root_seed=5)
    assert all(np.array_equal(a.codes, b.codes) for a, b in zip(d1.silos, d2.silos, strict=True))
    d3 = simulate_cell("nested/poor", 1, profile=prof, root_seed=5)
    assert not np.array_equal(d1.silos[0].codes, d3.silos[0].codes)


def test_truth_method_scores_perfectly(tmp_path, helpers):
    """A method returning the truth: ARI 1, VI 0, RB 0, coverage 1, no unmatched cluster."""
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("truth", "one-cluster"))
    rec = run_cell("nested/easy", 0, profile=prof, methods=prof.methods, root_seed=1, out=tmp_path,
                   registry=helpers.make_registry())
    t = rec["methods"]["truth"]
    assert t["ari"] == pytest.approx(1.0)
    assert t["vi"] == pytest.approx(0.0, abs=1e-12)
    assert t["n_unmatched_true"] == 0
    assert t["aligned"] == list(range(6))
    truth = np.asarray(rec["truth"]["weights"])
    assert np.allclose(t["pi"]["est"], truth)
    # one cluster: ARI 0 and VI = H(true partition) in nats, computed here from the label counts
    o = rec["methods"]["one-cluster"]
    sizes = np.asarray(rec["truth"]["sizes"], dtype=float)
    q = sizes[sizes > 0] / sizes.sum()
    assert o["ari"] == pytest.approx(0.0, abs=1e-12)
    assert o["vi"] == pytest.approx(float(-(q * np.log(q)).sum()))
    assert o["n_clusters"] == 1
    assert o["n_unmatched_true"] == 5


def test_saved_cells_and_atomic_files(tmp_path, helpers, call_log):
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("truth", "half"), replicates=2)
    run = run_study(prof, out=tmp_path, root_seed=3, registry=helpers.make_registry(call_log), progress=False)
    assert run.cells_total == run.cells_computed == 4
    for sc in prof.scenarios:
        for r in range(2):
            rec = json.loads(cell_path(tmp_path, sc, r).read_text())
            assert set(rec["methods"]) == {"truth", "half"}
            assert rec["scenario"] == sc and rec["replicate"] == r
    assert not list(tmp_path.rglob("*.tmp"))
    man = json.loads((tmp_path / "study.json").read_text())
    assert man["root_seed"] == 3 and man["runs"][-1]["machine"]["cores"] == os.cpu_count()
    assert len(load_cells(tmp_path)) == 4


def test_restart_after_interrupt_recomputes_no_finished_replicate(tmp_path, helpers, call_log):
    """Kill (KeyboardInterrupt) during the 5th method call; the restart computes only what was missing."""
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("truth",), replicates=4)   # 2 scenarios x 4 = 8 cells
    with pytest.raises(KeyboardInterrupt):
        run_study(prof, out=tmp_path, root_seed=9,
                  registry=helpers.make_registry(call_log, interrupt_after=4), progress=False)
    first = [c["seed"] for c in call_log.lines()]
    assert len(first) == 4
    assert len(load_cells(tmp_path)) == 4
    run = run_study(prof, out=tmp_path, root_seed=9, registry=helpers.make_registry(call_log), progress=False)
    assert run.cells_computed == 4
    seeds = [c["seed"] for c in call_log.lines()]
    assert len(seeds) == 8
    assert Counter(seeds).most_common(1)[0][1] == 1          # no cell computed twice
    # a third run computes nothing
    run = run_study(prof, out=tmp_path, root_seed=9, registry=helpers.make_registry(call_log), progress=False)
    assert run.cells_computed == 0 and len(call_log.lines()) == 8


@pytest.mark.slow
def test_killed_process_resumes_without_recomputing(tmp_path):
    """A real SIGKILL of a study process: finished cells keep their files and are not recomputed."""
    pytest.importorskip("vcmc.metrics")
    out = tmp_path / "study"
    log = tmp_path / "calls.txt"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import time, sys
        import numpy as np
        from vcmc.results import GlobalResult
        from vcmc.research.study.profiles import StudyProfile
        from vcmc.research.study.registry import Registry, StudyMethod
        from vcmc.research.study.runner import run_study

        def slow(dataset, *, seed, profile, shared=None):
            with open({str(log)!r}, "a") as fh:
                fh.write(f"{{seed}}\\n")
            # the first run blocks in its third cell until it is killed, so that the kill lands between two
            # finished cells whatever the machine's speed
            if sys.argv[1:] == ["block"] and len(open({str(log)!r}).read().split()) > 2:
                while True:
                    time.sleep(0.05)
            w = np.asarray(dataset.global_weights)
            counts = np.stack([np.bincount(l, minlength=w.size) for l in dataset.labels])
            return GlobalResult(method="slow", n_modalities=dataset.n_modalities,
                                silos=tuple(s.name for s in dataset.silos), weights=w,
                                profiles=np.asarray(dataset.profiles), partition_counts=counts,
                                assignments=tuple(dataset.labels))

        reg = Registry()
        reg.add(StudyMethod("slow", "Slow", slow))
        prof = StudyProfile(name="t", n_iter=20, burn_in=10, thin=1, n_components=4, n_replicates=6,
                            n_per_silo=40, methods=("slow",), scenarios=("homogeneous/easy",))
        run_study(prof, out={str(out)!r}, root_seed=4, registry=reg, progress=False)
    """))
    env = {**os.environ, "VCMC_NO_PROGRESS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), "block"], env=env)
    deadline = time.time() + 60
    cells = out / "cells" / "homogeneous-easy"
    while time.time() < deadline and len(list(cells.glob("rep-*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in cells.glob("rep-*.json")}
    assert len(done) == 2
    calls_before = log.read_text().split()
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=120)
    after = {p.name: p.stat().st_mtime_ns for p in cells.glob("rep-*.json")}
    assert len(after) == 6
    assert all(after[k] == v for k, v in done.items())         # finished cells untouched
    new_calls = log.read_text().split()[len(calls_before):]
    assert len(new_calls) == 6 - len(done)
    assert not set(new_calls) & {c for c in calls_before[:len(done)]}


def test_group_prepare_runs_once_per_cell(tmp_path, helpers, call_log):
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("counting-a", "truth", "counting-b"), replicates=2)
    run_study(prof, out=tmp_path, root_seed=2, registry=helpers.make_registry(call_log), progress=False)
    kinds = Counter(c["kind"] for c in call_log.lines())
    assert kinds == {"prepare": 4, "counting-a": 4, "counting-b": 4, "truth": 4}
    # adding a method later computes only that method in every cell
    prof2 = prof.with_overrides(methods=("counting-a", "truth", "counting-b", "half"))
    run_study(prof2, out=tmp_path, root_seed=2, registry=helpers.make_registry(call_log), progress=False)
    kinds = Counter(c["kind"] for c in call_log.lines())
    assert kinds == {"prepare": 4, "counting-a": 4, "counting-b": 4, "truth": 4, "half": 4}


def test_failed_method_is_recorded_and_retried(tmp_path, helpers, call_log):
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("truth", "fails"), replicates=1)
    reg = helpers.make_registry(call_log, fail_on={("nested", "poor")})
    run = run_study(prof, out=tmp_path, root_seed=2, registry=reg, progress=False)
    assert run.errors == [("nested/poor", 0, "fails")]
    rec = json.loads(cell_path(tmp_path, "nested/poor", 0).read_text())
    assert "truth" in rec["methods"] and "fails" not in rec["methods"]
    assert "deliberate failure" in rec["errors"]["fails"]["message"]
    # restart with the bug fixed: only the failed method runs again
    run = run_study(prof, out=tmp_path, root_seed=2, registry=helpers.make_registry(call_log), progress=False)
    assert run.errors == [] and run.methods_computed == 1
    rec = json.loads(cell_path(tmp_path, "nested/poor", 0).read_text())
    assert "fails" in rec["methods"] and rec["errors"] == {}


def test_other_settings_in_same_folder_are_refused(tmp_path, helpers):
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(replicates=1)
    run_study(prof, out=tmp_path, root_seed=2, registry=helpers.make_registry(), progress=False)
    with pytest.raises(ConfigError, match="other settings"):
        run_study(prof.with_overrides(n_iter=40), out=tmp_path, root_seed=2, registry=helpers.make_registry(),
                  progress=False)
    with pytest.raises(ConfigError, match="other settings"):
        run_study(prof, out=tmp_path, root_seed=3, registry=helpers.make_registry(), progress=False)


def test_single_replicate_matches_full_study(tmp_path, helpers):
    pytest.importorskip("vcmc.metrics")
    prof = helpers.tiny_profile(methods=("truth",), replicates=3)
    run_study(prof, out=tmp_path / "all", root_seed=11, registry=helpers.make_registry(), progress=False)
    run_study(prof, out=tmp_path / "one", root_seed=11, replicates=[2], registry=helpers.make_registry(),
              progress=False)
    a = json.loads(cell_path(tmp_path / "all", "nested/poor", 2).read_text())
    b = json.loads(cell_path(tmp_path / "one", "nested/poor", 2).read_text())
    assert a["data_seed"] == b["data_seed"] and a["truth"] == b["truth"]
    assert a["methods"]["truth"]["pi"] == b["methods"]["truth"]["pi"]
    assert len(load_cells(tmp_path / "one")) == 2


def test_bad_arguments_are_clear(tmp_path, helpers):
    prof = helpers.tiny_profile()
    with pytest.raises(ConfigError, match="'jobs'"):
        run_study(prof, out=tmp_path, jobs=0)
    with pytest.raises(ConfigError, match="needs jobs=1"):
        run_study(prof, out=tmp_path, jobs=2, registry=helpers.make_registry())
    with pytest.raises(ConfigError, match="must be one of"):
        run_study(prof.with_overrides(methods=("nope",)), out=tmp_path, registry=helpers.make_registry())
