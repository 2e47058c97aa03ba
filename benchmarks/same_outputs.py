"""Same seed, same outputs: compare two result folders file by file, apart from timings.

A refactoring must not change what a run writes. Run ``vcmc demo`` with the release before the change and
with the one after (same seed, the demo's default 2026), then compare the folders::

    python benchmarks/same_outputs.py --before-vcmc OLD/.venv/bin/vcmc --after-vcmc .venv/bin/vcmc
    python benchmarks/same_outputs.py BEFORE_DIR AFTER_DIR        # two folders written already

Every file must be byte-identical, except three whose differences are not results: ``result.json``
(compared as JSON without the timings, the per-silo seconds and the peak memory of the silo's process),
``posterior.nc`` (every group compared with ``xarray.testing.assert_identical`` without its
``created_at`` attribute) and ``report.html`` (compared as text with the folder's own path and the numbers
of its timings table blanked). Exit status 0 when the folders agree, 1 otherwise (each difference listed).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: keys of result.json that hold measurements of the run rather than its results
MEASUREMENT_KEYS = ("process_peak_rss_mb",)
MEASUREMENT_PREFIXES = ("seconds", "timings")


def _without_measurements(value):
    if isinstance(value, dict):
        return {k: _without_measurements(v) for k, v in value.items()
                if k not in MEASUREMENT_KEYS and not k.startswith(MEASUREMENT_PREFIXES)}
    if isinstance(value, list):
        return [_without_measurements(v) for v in value]
    return value


def _same_json(a: Path, b: Path) -> str | None:
    left = _without_measurements(json.loads(a.read_text(encoding="utf-8")))
    right = _without_measurements(json.loads(b.read_text(encoding="utf-8")))
    if left == right:
        return None
    flat_left, flat_right = _flat(left), _flat(right)
    keys = sorted(set(flat_left) ^ set(flat_right) | {k for k, v in flat_left.items() if flat_right.get(k, v) != v})
    return "differs at " + ", ".join(keys[:10]) + (" ..." if len(keys) > 10 else "")


def _flat(value, prefix="") -> dict:
    if isinstance(value, dict):
        return {k2: v2 for k, v in value.items() for k2, v2 in _flat(v, f"{prefix}{k}.").items()}
    if isinstance(value, list):
        return {k2: v2 for i, v in enumerate(value) for k2, v2 in _flat(v, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def _same_netcdf(a: Path, b: Path) -> str | None:
    import xarray as xr

    with xr.open_datatree(a) as left, xr.open_datatree(b) as right:
        if set(left.groups) != set(right.groups):
            return f"groups differ: {sorted(set(left.groups) ^ set(right.groups))}"
        for group in left.groups:
            da, db = left[group].to_dataset(), right[group].to_dataset()
            for ds in (da, db):
                ds.attrs.pop("created_at", None)
            try:
                xr.testing.assert_identical(da, db)
            except AssertionError as err:
                return f"group {group}: {str(err).splitlines()[0]}"
    return None


def _report_text(path: Path, folder: Path) -> str:
    text = path.read_text(encoding="utf-8")
    for spelling in {str(folder), str(folder.resolve())}:
        text = text.replace(spelling, "<folder>")
    # the numbers of the timings table (its header row, then one row of seconds)
    return re.sub(r"(<h3>Timings \(s\)</h3>.*?</thead>)(.*?)(</table>)",
                  lambda m: m.group(1) + re.sub(r"[0-9.]+", "#", m.group(2)) + m.group(3), text, flags=re.S)


def compare(before: Path, after: Path) -> list[str]:
    """Every difference between two result folders that is not a timing (an empty list: the same)."""
    files_a = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    files_b = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    problems = [f"{p}: only in {before}" for p in sorted(files_a - files_b)]
    problems += [f"{p}: only in {after}" for p in sorted(files_b - files_a)]
    for rel in sorted(files_a & files_b):
        a, b = before / rel, after / rel
        if a.read_bytes() == b.read_bytes():
            continue
        if rel.name == "result.json":
            why = _same_json(a, b)
        elif rel.suffix == ".nc":
            why = _same_netcdf(a, b)
        elif rel.name == "report.html":
            why = None if _report_text(a, a.parent) == _report_text(b, b.parent) else "differs beyond timings"
        else:
            why = "bytes differ"
        if why:
            problems.append(f"{rel}: {why}")
    return problems


def _demo(vcmc: str, out: Path, seed: int) -> None:
    subprocess.run([vcmc, "demo", "--out", str(out), "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="*", metavar="DIR", help="two result folders to compare")
    p.add_argument("--before-vcmc", metavar="EXE", help="the vcmc command of the release before the change")
    p.add_argument("--after-vcmc", metavar="EXE", help="the vcmc command of the release after it")
    p.add_argument("--seed", type=int, default=2026, help="the demo's seed (default: the demo's own, 2026)")
    args = p.parse_args(argv)
    if args.before_vcmc or args.after_vcmc:
        if not (args.before_vcmc and args.after_vcmc) or args.folders:
            p.error("give --before-vcmc and --after-vcmc together, without folders")
        work = Path(tempfile.mkdtemp(prefix="vcmc-same-outputs-"))
        before, after = work / "before", work / "after"
        _demo(args.before_vcmc, before, args.seed)      # one after the other: one CPU-heavy run at a time
        _demo(args.after_vcmc, after, args.seed)
    elif len(args.folders) == 2:
        before, after = (Path(f) for f in args.folders)
    else:
        p.error("give two folders, or --before-vcmc and --after-vcmc")
    problems = compare(before, after)
    n = sum(1 for q in before.rglob("*") if q.is_file())
    if problems:
        print(f"{len(problems)} difference(s) between {before} and {after}:")  # noqa: T201
        for line in problems:
            print(f"  {line}")  # noqa: T201
        return 1
    print(f"the same: {n} files of {before} and {after} agree (byte for byte, or apart from timings)")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
