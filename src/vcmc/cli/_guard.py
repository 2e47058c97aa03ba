"""What ``vcmc fit`` checks before any sampling, and how it ends when it cannot finish.

* ``--out``: never the working folder by accident (``""``), not a file, creatable and writable (a probe
  file is written and removed), with room for a rough estimate of what the run writes; a folder holding
  another run's results is refused unless ``--overwrite``, while the same run (same data, options and
  seed) may resume there. A run writes ``DIR/.vcmc-run.json`` (its key and command) before sampling, so
  that an interrupted run is recognised as itself.
* Arguments: validated up front, and the config classes' messages (``SamplerConfig.n_iter``) are said with
  the flag the user typed (``--iterations``).
* Ctrl-C: one line saying what was kept and the exact command that resumes; exit code 130.
* A write that fails (a full disk, ``EFBIG`` under a file-size limit): one clear error; every output is
  written to a temporary file and renamed (``vcmc.atomic``), so the folder keeps the old files or none.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from vcmc.config.schema import flags
from vcmc.exceptions import ConfigError, VcmcError

RUN_MANIFEST = ".vcmc-run.json"
#: What a run of ``vcmc fit`` writes into ``--out`` (a folder holding any of them holds a run's results).
RESULT_NAMES = ("result.json", "assignments.csv", "profiles.csv", "posterior.nc", "memberships.csv",
                "schema.json", "report.html", "characterisation.csv")
OUTPUT_NAMES = (*RESULT_NAMES, "summaries", "silo-state", RUN_MANIFEST)

# The flag that sets each option, by dotted key with underscores (from the option table, where each
# option's flag is defined); options without a flag are named as "--set key=...".
FLAG_OF = flags()


class OutputError(VcmcError):
    """``--out`` cannot take the run's results (not a folder, not writable, too little room, another run's)."""


# -- messages in the CLI's words ----------------------------------------------------------------------------
def _section_of() -> dict[str, str]:
    from vcmc.config.mapping import SECTIONS

    return {cls.__name__: name for name, cls in SECTIONS.items()}


def typed_options(args, file_keys=()) -> dict[str, str]:
    """For each option the user set, how they set it: ``{"sampler.n_iter": "--iterations", ...}``."""
    out = {k.replace("-", "_"): f"--config {args.config}" for k in file_keys}
    for text in getattr(args, "settings", []) or []:
        key = text.partition("=")[0].strip()
        out[key.replace("-", "_")] = f"--set {key}"
    if "iterations" in vars(args):
        out["sampler.stop" if args.iterations == "auto" else "sampler.n_iter"] = "--iterations"
    if "max_iterations" in vars(args):
        out["sampler.n_iter"] = "--max-iterations"
    if getattr(args, "burn_in", None) is not None:
        out["sampler.burn_in"] = "--burn-in"
    for key, flag in FLAG_OF.items():
        if key.replace("_", "-") in vars(args) or key in vars(args):
            out[key] = flag
    if getattr(args, "no_fractionation", False):
        out["prior.fractionate"] = "--no-fractionation"
    if "matching" in vars(args):
        out["matching.method"] = "--matching"
    if "strategy" in vars(args):
        out["aggregation.strategy"] = "--strategy"
    if "clusters" in vars(args) and "prior.n-components" not in vars(args):
        out["prior.n_components"] = "--clusters"
    return out


def say_config_error(err: ConfigError, typed: dict[str, str]) -> ConfigError:
    """The config classes' message said with the flag the user typed, when the error names one option."""
    option = getattr(err, "option", None)
    if not option or err.expected is None:
        return err
    owner, _, field = option.partition(".")
    section = _section_of().get(owner)
    if section is None:
        return err
    key = f"{section}.{field}"
    how = typed.get(key)
    if how is None:
        flag = FLAG_OF.get(key)
        # an option left at its default, invalid only together with another one (burn-in >= iterations)
        how = f"{flag} (default)" if flag else f"--set {section}.{field.replace('_', '-')} (default)"
    expected = str(err.expected)
    for other, flag in {"n_iter": typed.get("sampler.n_iter", "--iterations"),
                        "burn_in": typed.get("sampler.burn_in", "--burn-in")}.items():
        expected = expected.replace(other, flag)
    return ConfigError(f"{how} must be {expected}; got {err.got!r}", option=option, expected=expected,
                       got=err.got)


def validate_args(args) -> None:
    """The flags that are not options of ``FitConfig``, checked before anything is read or sampled."""
    if args.seed is not None and args.seed < 0:
        raise ConfigError(f"--seed must be a whole number >= 0 (any size); got {args.seed}")
    if args.jobs < 1:
        raise ConfigError(f"--jobs must be a whole number >= 1 (worker processes); got {args.jobs}")
    if args.min_silos is not None and args.min_silos < 1:
        raise ConfigError(f"--min-silos must be a whole number >= 1 (at most the number of silos); got "
                          f"{args.min_silos}")
    if args.n_clusters is not None and args.n_clusters < 1:
        raise ConfigError(f"--n-clusters must be a whole number >= 1; got {args.n_clusters}")
    if "clusters" in vars(args) and args.clusters < 1:
        raise ConfigError(f"--clusters must be a whole number >= 1; got {args.clusters}")
    if args.method == "fed-kmodes" and args.n_clusters is None and "clusters" not in vars(args):
        raise ConfigError("--method fed-kmodes needs --n-clusters K (K-modes does not infer the number of "
                          "clusters)")
    for na in (t for group in getattr(args, "na_values", None) or [] for t in group):
        if na == "":
            raise ConfigError("--na-values: the empty cell is always missing; give the other texts, e.g. "
                              "--na-values NA,-9")


def validate_config(config, typed: dict[str, str]) -> None:
    """Checks of the options together that the config classes leave to the caller (they accept what the
    library's own low-level uses need)."""
    sampler = config.sampler
    if sampler.n_kept * sampler.n_chains < 2:
        # one draw: no posterior variance, so calibrated matching keeps every local cluster apart
        flag = typed.get("sampler.thin", "--thin (default)")
        room = sampler.n_iter - sampler.burn_in
        raise ConfigError(f"{flag} must be at most ({typed.get('sampler.n_iter', '--iterations')} - "
                          f"{typed.get('sampler.burn_in', '--burn-in')}) / 2 = {room // 2} so that at least 2 draws "
                          f"are kept after the burn-in; got {sampler.thin}")


def validate_against_data(args, silos) -> None:
    """Checks that need the silos (their number), still before any sampling."""
    n = len(silos)
    if args.min_silos is not None and args.min_silos > n:
        raise ConfigError(f"--min-silos {args.min_silos} is more than the {n} silo(s) given; expected at most "
                          f"{n}")
    if args.n_clusters is not None and args.n_clusters > sum(s.n_rows for s in silos):
        raise ConfigError(f"--n-clusters {args.n_clusters} is more than the {sum(s.n_rows for s in silos)} "
                          "rows of all silos")


# -- the output folder ------------------------------------------------------------------------------------
def check_out_dir(text: str) -> Path:
    """``--out`` is a folder that exists or can be created, and a file can be written in it."""
    if text is None or not str(text).strip():
        raise OutputError(f"--out must name a folder for the results; got {text!r} (an empty name would write "
                          "into the working folder). Give e.g. --out results/run1")
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {text}: is a file, not a folder; choose a folder for the results (it is "
                          "created if it does not exist)")
    parent = out
    while not parent.exists():     # the nearest existing ancestor: a file there also blocks the folder
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"--out {text}: {parent} is a file, so the folder cannot be created")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".vcmc-probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OutputError(f"--out {text}: cannot write there ({err.strerror or err}); choose a folder you can "
                          "write to") from None
    return out


def run_key(*, method: str, config, seed: int, silos, n_clusters, normalisation, na_values) -> str:
    """What determines a run's results: the data (codes and schema of every silo), the options, the seed."""
    h = hashlib.sha256()
    h.update(json.dumps({"method": method, "config": config.to_dict(), "seed": str(seed),
                         "n_clusters": n_clusters, "normalisation": normalisation.to_dict(),
                         "na_values": sorted(na_values)}, sort_keys=True, default=str).encode())
    for s in silos:
        h.update(s.name.encode() + b"\0" + s.schema.fingerprint().encode())
        h.update(np.ascontiguousarray(s.codes).tobytes())
    return h.hexdigest()


def check_previous_run(out: Path, key: str, *, overwrite: bool) -> str:
    """``"new"``, ``"resume"`` (the same run's folder) or ``"overwrite"``; refuses another run's results."""
    present = [n for n in OUTPUT_NAMES if (out / n).exists()]
    if not present:
        return "new"
    previous = {}
    with contextlib.suppress(OSError, ValueError):
        previous = json.loads((out / RUN_MANIFEST).read_text(encoding="utf-8"))
    if previous.get("key") == key:
        return "resume"
    if overwrite:
        return "overwrite"
    when = previous.get("started")
    what = f" (run started {when}, seed {previous.get('seed')})" if when else ""
    raise OutputError(f"--out {out}: holds the results of another run{what}: {', '.join(present)}. They are "
                      "kept: choose another --out, or add --overwrite to replace them (the same data, options "
                      "and --seed resume in place)")


def write_run_manifest(out: Path, key: str, seed: int, argv: list[str]) -> None:
    from vcmc.atomic import atomic_write_json

    atomic_write_json(out / RUN_MANIFEST, {"key": key, "seed": str(seed), "command": resume_command(argv, seed),
                                           "started": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2)


def estimate_bytes(config, silos, *, resume: bool, save_summaries: bool) -> dict[str, int]:
    """A rough estimate of what the run writes, by kind, with 5 clusters per silo and overall (at most C+):
    the check is there to stop a run that cannot fit, not to refuse one that probably does."""
    c = min(config.prior.n_components, 5)
    p = int(sum(silos[0].schema.n_modalities))
    draws = config.sampler.n_kept * config.sampler.n_chains
    if config.postprocess.summary_draws:
        draws = min(draws, config.postprocess.summary_draws)
    n = sum(s.n_rows for s in silos)
    per_draw = 8 * c * (1 + p)
    out = {"posterior.nc": draws * per_draw + 65_536, "assignments.csv": n * 24 + 4096,
           "profiles.csv": c * p * 80 + 4096, "result.json": 65_536 + 2_048 * len(silos)}
    if resume:   # each silo's state: its summary's draws, the same draws kept locally, memberships
        out["silo-state"] = sum(2 * draws * per_draw + s.n_rows * (8 * c + 16) for s in silos)
    if save_summaries:
        out["summaries"] = len(silos) * draws * per_draw
    return out


def check_free_space(out: Path, needed: dict[str, int]) -> None:
    free = shutil.disk_usage(out).free
    total = sum(needed.values())
    if free < total:
        parts = ", ".join(f"{k} ~{v / 2**20:.1f} MB" for k, v in needed.items())
        raise OutputError(f"--out {out}: {free / 2**20:.1f} MB free, the run writes up to about "
                          f"{total / 2**20:.1f} MB ({parts}); free some space or choose another --out")


def remove_stale(out: Path, written) -> None:
    """After ``--overwrite``: the earlier run's result files this run did not write (they would not match)."""
    keep = {Path(p).name for p in written}
    for name in RESULT_NAMES:
        if name not in keep:
            with contextlib.suppress(FileNotFoundError):
                (out / name).unlink()


# -- ending ----------------------------------------------------------------------------------------------------
def resume_command(argv: list[str], seed: int) -> str:
    """The command that runs this fit again: the user's own words, with the seed it used."""
    words = list(argv)
    if not any(w == "--seed" or w.startswith("--seed=") for w in words):
        words += ["--seed", str(seed)]
    return shlex.join(["vcmc", *words])


def interrupted_line(out: Path, argv: list[str], seed: int, *, resume: bool, n_silos: int) -> str:
    if not resume:
        return (f"vcmc fit: interrupted; nothing was kept (--no-resume); run again with: "
                f"{resume_command(argv, seed)}")
    state = out / "silo-state"
    # hidden names are the temporary files of writes that were cut short
    n_kept = len([p for p in state.glob("*.npz") if not p.name.startswith(".")]) if state.is_dir() else 0
    return (f"vcmc fit: interrupted; kept the finished sampling of {min(n_kept, n_silos)} of {n_silos} silo(s) "
            f"in {out / 'silo-state'}; resume with: {resume_command(argv, seed)}")


def write_error(err: OSError, out: Path, *, resume: bool) -> OutputError:
    """A failed write of the results as one clear error (the atomic writer left no partial file)."""
    what = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file grew beyond the file-size limit",
            errno.EDQUOT: "the disk quota is exceeded", errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied"}.get(err.errno, err.strerror or str(err))
    where = f" ({err.filename})" if getattr(err, "filename", None) else ""
    kept = ("the silos' finished sampling is kept in " + str(out / "silo-state") + ": free space and run the "
            "same command again to write the results without sampling again") if resume else \
        "with --no-resume the sampling was not kept"
    return OutputError(f"cannot write the results into {out}: {what}{where}. No result file was left half "
                       f"written (each is replaced only once complete); {kept}")
