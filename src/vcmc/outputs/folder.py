"""``--out``: a folder that exists or can be created, writable, held by this run alone, and left without the
temporary files of a run that was killed."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from vcmc.exceptions import VcmcError
from vcmc.outputs import lock, signals

#: What the maximum-likelihood latent class commands write (``vcmc compare``, ``vcmc fit --k K``).
LCA_NAMES = ("comparison.csv", "comparison.png", "lca.json", "fit_statistics.csv", "item_probabilities.csv",
             "item_probabilities.png", "covariates.csv", "distal.csv", "distal_tests.csv", "forest.png")
#: What both kinds of fit write when the schema has continuous variables (the clusters' means and standard
#: deviations in the data's units): listed so that a run without them removes an earlier run's copy.
CONTINUOUS_NAMES = ("continuous.csv",)
#: What a run of ``vcmc fit`` or ``vcmc compare`` writes into ``--out`` (a folder holding any of them holds a
#: run's results).
RESULT_NAMES = ("result.json", "assignments.csv", "profiles.csv", "posterior.nc", "memberships.csv",
                "schema.json", "report.html", "characterisation.csv", *CONTINUOUS_NAMES, *LCA_NAMES)
#: The files that make one result set (``predict`` and ``report`` read them; they must come from one run).
CORE_NAMES = ("result.json", "assignments.csv", "profiles.csv", "posterior.nc", "memberships.csv", "schema.json")
OUTPUT_NAMES = (*RESULT_NAMES, "summaries", "silo-state", ".vcmc-run.json", "study.json")
#: Sub-folders a run writes temporary files into.
_TEMP_FOLDERS = ("", "silo-state", "summaries", "figures")


class OutputError(VcmcError):
    """``--out`` cannot take the run's results (not a folder, not writable, too little room, another run's)."""


def check_out_dir(text, *, command: str = "vcmc", flag: str = "--out") -> Path:
    """``--out`` is a folder that exists or can be created, and a file can be written in it; then this
    process holds its lock (:mod:`vcmc.outputs.lock`), SIGTERM/SIGHUP end the run like Ctrl-C, and the
    temporary files a killed run left are removed (no other run can be writing them: the lock is ours)."""
    if text is None or not str(text).strip():
        raise OutputError(f"{flag} must name a folder for the results; got {text!r} (an empty name would write "
                          "into the working folder). Give e.g. --out results/run1")
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{flag} {text}: is a file, not a folder; choose a folder for the results (it is "
                          "created if it does not exist)")
    parent = out
    while not parent.exists():     # the nearest existing ancestor: a file there also blocks the folder
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{flag} {text}: {parent} is a file, so the folder cannot be created")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".vcmc-probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OutputError(f"{flag} {text}: cannot write there ({err.strerror or err}); choose a folder you can "
                          "write to") from None
    lock.acquire(out, command)
    signals.end_like_ctrl_c()
    remove_leftovers(out)
    return out


def leftovers(out: Path) -> list[Path]:
    """Temporary files of interrupted writes (``vcmc.atomic`` names them ``.<stem>.<random>.tmp<suffix>``)."""
    found = []
    for sub in _TEMP_FOLDERS:
        folder = out / sub if sub else out
        if folder.is_dir():
            found += [p for p in folder.iterdir() if p.name.startswith(".") and ".tmp" in p.name and p.is_file()]
    return sorted(found)


def remove_leftovers(out: Path) -> list[Path]:
    """Remove what :func:`leftovers` finds; only under this process's lock of ``out``."""
    if not lock.holds(out):
        raise RuntimeError(f"remove_leftovers({out}) without holding its lock")
    gone = leftovers(out)
    for p in gone:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    return gone


def remove_stale(out: Path, written) -> None:
    """After ``--overwrite``: the earlier run's result files this run did not write (they would not match)."""
    keep = {Path(p).name for p in written}
    for name in RESULT_NAMES:
        if name not in keep:
            with contextlib.suppress(FileNotFoundError):
                (out / name).unlink()


def same_folder(a, b) -> bool:
    with contextlib.suppress(OSError):
        return Path(a).resolve() == Path(b).resolve()
    return False


def check_simulation_folder(out: Path, *, design: str, seed: int, overwrite: bool) -> None:
    """``vcmc simulate --out``: a folder holding another simulation (another design or seed) or a fit's
    results is refused unless ``--overwrite``; the same simulation again rewrites the same files."""
    import json

    truth = out / "truth.json"
    if (out / "result.json").exists() and not overwrite:
        raise OutputError(f"--out {out} holds the results of a vcmc fit; choose another --out for the simulated "
                          "files, or add --overwrite")
    if not truth.is_file() or overwrite:
        return
    try:
        previous = json.loads(truth.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    if previous.get("design") != design or str(previous.get("seed")) != str(seed):
        raise OutputError(f"--out {out} holds another simulation (design {previous.get('design')!r}, seed "
                          f"{previous.get('seed')}): it is kept; choose another --out, or add --overwrite to "
                          "replace it")


def remove_other_silo_files(out: Path, written) -> None:
    """After a simulation: silo files an earlier simulation with more silos left (they would be read as
    silos of this one by ``vcmc fit out/silo_*.csv``)."""
    keep = {Path(p).name for p in written}
    for p in out.glob("silo_*.csv"):
        if p.name not in keep:
            p.unlink()


def check_study_folder(out: Path, *, other: dict | None, layout, overwrite: bool) -> None:
    """``vcmc study --out``: a folder holding another command's results (a fit, a comparison) or another study
    (``other``: its manifest; other settings or seed) is refused and kept unless ``--overwrite``, which
    replaces them (the other study's ``layout`` entries, the other results); the same study resumes."""
    manifest = out / ".vcmc-run.json"
    results = [n for n in RESULT_NAMES if (out / n).exists()]
    if not manifest.exists():           # a schema.json in a folder no run wrote into is the user's own
        results = [n for n in results if n != "schema.json"]
    results += [manifest.name] if manifest.exists() else []
    if not overwrite:
        if results:
            raise OutputError(f"--out {out} holds the results of another vcmc command ({', '.join(results)}): they "
                              "are kept; choose another --out for the study, or add --overwrite to replace them")
        if other is not None:
            raise OutputError(f"--out {out} holds another study (seed {other.get('root_seed')}, profile "
                              f"{(other.get('profile') or {}).get('name', '?')!r}, other settings): it is kept; "
                              "choose another --out, give that study's settings to resume it, or add --overwrite "
                              "to replace it")
        return
    if results:
        remove_stale(out, ())
        manifest.unlink(missing_ok=True)
    if other is not None:
        for name in layout:
            path = out / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
