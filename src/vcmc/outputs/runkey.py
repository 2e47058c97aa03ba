"""What identifies a run, and the folder's record of it (``DIR/.vcmc-run.json``, the manifest).

A run's key hashes everything that determines its results (the data, the options, the seed). The manifest
is written before any sampling with the key and the command, *without* a list of files: the folder holds an
unfinished run. Once every result file is in place :func:`seal_results` adds the sha256 digest of each, so
the result set carries its run's key. ``predict`` and ``report`` (:func:`check_result_set`) refuse a folder
whose run did not finish or whose files are not the ones its run wrote (a kill between the renames of an
``--overwrite`` run, a file copied in from another run): results are never mixed. Folders written without a
manifest (by the Python API's ``write_outputs``) are read as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from vcmc.outputs.folder import CORE_NAMES, OUTPUT_NAMES, OutputError

RUN_MANIFEST = ".vcmc-run.json"


def run_key(*, method: str, config, seed: int, silos, n_clusters, normalisation, na_values, extra=None) -> str:
    """What determines a fit's results: the data (codes and schema of every silo), the options, the seed
    (and ``extra`` settings, when any is set: the three-step models' columns)."""
    h = hashlib.sha256()
    parts = {"method": method, "config": config.to_dict(), "seed": str(seed), "n_clusters": n_clusters,
             "normalisation": normalisation.to_dict(), "na_values": sorted(na_values)}
    if extra and any(v is not None for v in extra.values()):     # absent otherwise: earlier runs keep their key
        parts["extra"] = extra
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    for s in silos:
        h.update(s.name.encode() + b"\0" + s.schema.fingerprint().encode())
        h.update(np.ascontiguousarray(s.codes).tobytes())
    return h.hexdigest()


def content_key(parts: dict, files=()) -> str:
    """The key of a run of another command: its settings and the bytes of the files it reads."""
    h = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    for f in files:
        h.update(str(f).encode() + b"\0" + file_digest(Path(f)).encode())
    return h.hexdigest()


def file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def read_manifest(out: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        m = json.loads((Path(out) / RUN_MANIFEST).read_text(encoding="utf-8"))
        return m if isinstance(m, dict) else None
    return None


def previous_seed(out: Path, key_of) -> int | None:
    """The seed drawn by the run recorded in ``out`` when, with that seed, this run's key is that run's
    (the same data and options): a command repeated without ``--seed`` resumes instead of being refused."""
    previous = read_manifest(out) or {}
    with contextlib.suppress(TypeError, ValueError):
        seed = int(previous.get("seed"))
        if previous.get("key") == key_of(seed):
            return seed
    return None


def check_previous_run(out: Path, key: str, *, overwrite: bool, what: str = "run") -> str:
    """``"new"``, ``"resume"`` (the same run's folder) or ``"overwrite"``; refuses another run's results.

    A ``schema.json`` in a folder no run wrote into (no manifest) is the user's own: ``--out`` may be the
    folder of the input files, whose schema is not another run's result."""
    previous = read_manifest(out)
    present = [n for n in OUTPUT_NAMES if (out / n).exists()]
    if previous is None:
        present = [n for n in present if n != "schema.json"]
    if not present:
        return "new"
    previous = previous or {}
    if previous.get("key") == key:
        return "resume"
    if overwrite:
        return "overwrite"
    when = previous.get("started")
    seed = f", seed {previous.get('seed')}" if previous.get("seed") is not None else ""
    how = f" (run started {when}{seed})" if when else ""
    raise OutputError(f"--out {out}: holds the results of another {what}{how}: {', '.join(present)}. They are "
                      "kept: choose another --out, or add --overwrite to replace them (the same data, options "
                      "and --seed resume in place)")


def write_run_manifest(out: Path, key: str, seed, argv: list[str], *, command: str | None = None) -> None:
    """Before any result is written: the folder now holds this run, unfinished."""
    from vcmc.atomic import atomic_write_json
    from vcmc.outputs.messages import resume_command

    atomic_write_json(out / RUN_MANIFEST, {
        "key": key, "seed": None if seed is None else str(seed),
        "command": command or resume_command(argv, seed), "started": time.strftime("%Y-%m-%d %H:%M:%S")},
        indent=2)


def choose_seed(seed, out: Path, key_of) -> int:
    """``seed`` (``--seed``), else the seed the run in ``out`` drew when this command is that run again (same
    data and options: it resumes, as the README says), else a new one (recorded in the manifest)."""
    import sys

    if seed is not None:
        return int(seed)
    previous = previous_seed(out, key_of)
    if previous is not None:
        print(f"note: resuming the run in {out} with the seed it drew ({previous}); give --seed to start "  # noqa: T201
              "another run", file=sys.stderr)
        return previous
    return int(np.random.SeedSequence().entropy)


def seal_results(out: Path, key: str, written, *, names=CORE_NAMES) -> None:
    """Once every result file is in place: their digests (of those among ``names``), so that the set is known
    to be this run's."""
    from vcmc.atomic import atomic_write_json

    manifest = read_manifest(out) or {}
    if manifest.get("key") != key:
        raise OutputError(f"{out / RUN_MANIFEST}: another run's manifest replaced this run's while it wrote "
                          "its results; the folder was not held by one run")
    names = sorted({Path(p).name for p in written} & set(names))
    manifest["files"] = {n: file_digest(out / n) for n in names}
    manifest["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    atomic_write_json(out / RUN_MANIFEST, manifest, indent=2)


def check_result_set(folder: Path, *, reader: str) -> dict | None:
    """The folder's result files are one finished run's, as it wrote them; else a refusal naming why."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest is None:
        if (folder / RUN_MANIFEST).exists():
            raise OutputError(f"{folder / RUN_MANIFEST} cannot be read; {reader} cannot tell which run wrote "
                              f"{folder}: run that command again")
        return None
    command = manifest.get("command", "the command that wrote it")
    if "files" not in manifest:
        raise OutputError(f"{folder}: the run started {manifest.get('started', '?')} did not finish writing its "
                          f"results (interrupted?); the files there may mix it with an earlier run, so {reader} "
                          f"refuses them. Finish that run by running its command again: {command}")
    files = manifest["files"]
    problems = []
    for name in CORE_NAMES:
        path = folder / name
        if name in files and not path.is_file():
            problems.append(f"{name} is missing")
        elif name in files and file_digest(path) != files[name]:
            problems.append(f"{name} is not the file that run wrote (changed, or copied from another run)")
        elif name not in files and path.is_file():
            problems.append(f"{name} was not written by that run (left by another one)")
    if problems:
        raise OutputError(f"{folder}: its result files are not one run's: " + "; ".join(problems) + f". {reader} "
                          f"refuses mixed results; run the command that wrote them again ({command}), with "
                          "--overwrite if needed")
    return manifest
