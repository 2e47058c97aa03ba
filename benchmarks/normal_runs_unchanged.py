"""Normal runs unchanged: ``vcmc demo`` of this checkout against the same demo of another commit, file by file.

The boundary gate (docs/federation.md) must change nothing a run in the analyst's own session computes when
no suppression, rounding or noise is set. This script checks out ``--against`` (default ``main``) in a
temporary git worktree, runs ``vcmc demo --seed S --iterations N`` with that checkout's sources and with this
one's (the same interpreter and libraries; one after the other), and compares every file written: data,
result CSVs, ``posterior.nc``, figures and the report byte for byte, and ``result.json`` field by field with
the timings, versions and paths that differ by construction left out. Prints ONE JSON line: the files
compared, those identical, and every difference. Exit status 1 when a result differs.

    python benchmarks/normal_runs_unchanged.py [--against main] [--iterations 1000] [--seed 3]
    python benchmarks/normal_runs_unchanged.py --study quick --replicates 1
    python benchmarks/normal_runs_unchanged.py --study generalisation-quick

The full demo (the paper's protocol) is ``--iterations 50000``; the full suites ``--study paper`` and
``--study generalisation`` (hours on an idle machine; the study writes every replicate's cell JSON, compared
field by field with the timings left out).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _provenance import commit

REPO = Path(__file__).resolve().parents[1]
# keys of result.json, the study's cells and study.json that differ between two runs of the same computation
# (wall and CPU times, peak memory, versions, when and how the study was started); every other key is compared
_VOLATILE = frozenset({"timings_s", "timings", "seconds", "seconds_apply", "seconds_sampler", "time_s", "time_own_s",
                       "time_parallel_s", "process_peak_rss_mb", "vcmc_version", "version", "started", "finished",
                       "created", "command", "platform", "python"})


def _run(src: Path, out: Path, args) -> None:
    """``vcmc demo`` (or ``vcmc study``) with the sources of ``src``, into ``out``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", "import vcmc, sys; assert vcmc.__file__.startswith(sys.argv[1]), "
                    "vcmc.__file__", str(src)], env=env, check=True)
    if args.study:
        command = ["study", "--profile", args.study, "--jobs", "1", "--no-figures", "--seed", str(args.seed)]
        command += [] if args.replicates is None else ["--replicates", str(args.replicates)]
    else:
        command = ["demo", "--iterations", str(args.iterations), "--seed", str(args.seed)]
    subprocess.run([sys.executable, "-m", "vcmc", *command, "--out", str(out)], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def _strip(value, key=""):
    if isinstance(value, dict):
        return {k: _strip(v, k) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v, key) for v in value]
    return value


def _diff_json(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'this checkout' if k in b else 'the reference'}")
            else:
                out += _diff_json(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff_json(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {json.dumps(a)[:80]} != {json.dumps(b)[:80]}"]


def _same_posterior(a: Path, b: Path) -> bool:
    """The same draws, coordinates and attributes but ArviZ's ``created_at`` stamp."""
    import xarray as xr

    with xr.open_dataset(a, group="posterior") as x, xr.open_dataset(b, group="posterior") as y:
        attrs = [{k: v for k, v in d.attrs.items() if k != "created_at"} for d in (x, y)]
        return bool(x.equals(y)) and attrs[0] == attrs[1]


def _without_timings(html: str) -> str:
    """The report without its "Timings (s)" table and the rounds' "seconds" (wall times differ by construction)."""
    start = html.find("<h3>Timings (s)</h3>")
    end = html.find("</table>", start)
    html = html if start < 0 or end < 0 else html[:start] + html[end:]
    return re.sub(r"<dt>seconds</dt><dd>[^<]*</dd>", "<dt>seconds</dt><dd></dd>", html)


def _is_time(header: str) -> bool:
    header = header.strip().lower()
    return header.startswith("time") or header.endswith("(s)") or "run time" in header


def _without_run_times(text: str, suffix: str) -> list:
    """A study table without its wall times: the rows of a run-time table (the paper's Table 3) and the time
    columns (``time_s``, ``time (s)``) of a CSV or Markdown table."""
    if suffix == ".csv":
        rows = [r for r in csv.reader(io.StringIO(text)) if not any("run time" in c for c in r)]
        drop = {j for j, c in enumerate(rows[0]) if _is_time(c)} if rows else set()
        return [[c for j, c in enumerate(r) if j not in drop] for r in rows]
    lines = [line for line in text.splitlines() if "run time" not in line]
    out, drop = [], set()
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            out.append(line)
            drop = set()
            continue
        cells = line.strip().strip("|").split("|")
        if i + 1 < len(lines) and lines[i + 1].startswith("| ---"):          # a table's header
            drop = {j for j, c in enumerate(cells) if _is_time(c)}
        out.append([c for j, c in enumerate(cells) if j not in drop])
    return out


def compare(reference: Path, current: Path) -> dict:
    files = sorted({p.relative_to(reference) for p in reference.rglob("*") if p.is_file()}
                   | {p.relative_to(current) for p in current.rglob("*") if p.is_file()})
    identical, differences = [], {}
    for rel in files:
        a, b = reference / rel, current / rel
        if not a.is_file() or not b.is_file():
            differences[str(rel)] = ["only in " + ("this checkout" if b.is_file() else "the reference")]
        elif a.read_bytes() == b.read_bytes():
            identical.append(str(rel))
        elif rel.name == "posterior.nc" and _same_posterior(a, b):
            identical.append(f"{rel} (but its created_at stamp)")
        elif rel.name == "report.html" and _without_timings(a.read_text()) == _without_timings(b.read_text()):
            identical.append(f"{rel} (but its timings table)")
        elif rel.suffix in (".csv", ".md") and (_without_run_times(a.read_text(), rel.suffix)
                                                == _without_run_times(b.read_text(), rel.suffix)):
            identical.append(f"{rel} (but its run-time rows)")
        elif rel.suffix == ".json":
            d = _diff_json(_strip(json.loads(a.read_text())), _strip(json.loads(b.read_text())))
            (differences.__setitem__(str(rel), d) if d else identical.append(f"{rel} (but volatile fields)"))
        else:
            differences[str(rel)] = ["bytes differ"]
    return {"files": len(files), "identical": identical, "differences": differences}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="main", help="the reference commit (default: main)")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--study", default=None, help="run `vcmc study --profile STUDY` instead of the demo "
                        "(quick, generalisation-quick; paper and generalisation are the full suites)")
    parser.add_argument("--replicates", type=int, default=None, help="with --study: replicates per scenario")
    parser.add_argument("--keep", type=Path, default=None, help="keep both demos' folders here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vcmc-unchanged-") as tmp:
        tmp = Path(tmp) if args.keep is None else args.keep
        tmp.mkdir(parents=True, exist_ok=True)
        ref_tree = tmp / "reference"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(ref_tree), args.against],
                       check=True, capture_output=True)
        try:
            reference_commit = subprocess.run(["git", "-C", str(ref_tree), "rev-parse", "HEAD"], check=True,
                                              capture_output=True, text=True).stdout.strip()
            # both into the same folder (the report names it), moved aside after each run
            for src, name in ((ref_tree / "src", "ref-out"), (REPO / "src", "cur-out")):
                shutil.rmtree(tmp / name, ignore_errors=True)
                _run(src, tmp / "demo", args)
                (tmp / "demo").rename(tmp / name)
            report = compare(tmp / "ref-out", tmp / "cur-out")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(ref_tree)], check=False,
                           capture_output=True)
    report = {"command": "python benchmarks/normal_runs_unchanged.py " + " ".join(sys.argv[1:]),
              "commit": commit(), "against": args.against, "against_commit": reference_commit,
              "run": (f"vcmc study --profile {args.study}" if args.study
                      else f"vcmc demo --iterations {args.iterations}"),
              "seed": args.seed, "n_identical": len(report["identical"]), **report}
    print(json.dumps(report))
    sys.exit(1 if report["differences"] else 0)


if __name__ == "__main__":
    main()
