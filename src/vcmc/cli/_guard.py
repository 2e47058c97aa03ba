"""What ``vcmc fit`` checks in its arguments and data before any sampling.

* Arguments: validated up front, and the config classes' messages (``SamplerConfig.n_iter``) are said with
  the flag the user typed (``--iterations``).
* The data: what can be refused from the silos' sizes is refused before any silo samples (a silo too small
  to sample, a ``--min-cluster-size`` no silo can meet); what may be a mistake but can be a fact is said
  on the console before sampling (``vcmc.data.checks``; ESS targets the run cannot reach).

The output folder, the run key, the disk estimate and how an unfinished run ends are the writer discipline
every command shares, in :mod:`vcmc.outputs` (re-exported here under the names ``vcmc fit`` calls).
"""

from __future__ import annotations

import sys

from vcmc.config.schema import flags
from vcmc.exceptions import ConfigError
from vcmc.outputs.folder import OUTPUT_NAMES, RESULT_NAMES, OutputError, check_out_dir, remove_stale
from vcmc.outputs.messages import interrupted_line, resume_command, write_error
from vcmc.outputs.runkey import (
    RUN_MANIFEST,
    check_previous_run,
    previous_seed,
    run_key,
    seal_results,
    write_run_manifest,
)
from vcmc.outputs.space import check_free_space, estimate_bytes

__all__ = ["OUTPUT_NAMES", "RESULT_NAMES", "RUN_MANIFEST", "OutputError", "check_free_space", "check_out_dir",
           "check_previous_run", "choose_seed", "estimate_bytes", "interrupted_line", "previous_seed",
           "remove_stale", "resume_command", "run_key", "say_config_error", "seal_results", "typed_options",
           "validate_against_data", "validate_args", "validate_config", "write_error", "write_run_manifest"]

# The flag that sets each option, by dotted key with underscores (from the option table, where each
# option's flag is defined); options without a flag are named as "--set key=...".
FLAG_OF = flags()


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


def validate_against_data(args, silos, config=None) -> None:
    """Checks that need the silos (their number and sizes), still before any sampling; then the warnings
    about the data and the run that matter, on the console before the wait."""
    n = len(silos)
    if args.min_silos is not None and args.min_silos > n:
        raise ConfigError(f"--min-silos {args.min_silos} is more than the {n} silo(s) given; expected at most "
                          f"{n}")
    if args.n_clusters is not None and args.n_clusters > sum(s.n_rows for s in silos):
        raise ConfigError(f"--n-clusters {args.n_clusters} is more than the {sum(s.n_rows for s in silos)} "
                          "rows of all silos")


    if config is not None:
        _refuse_from_sizes(args, silos, config)
        for line in [*data_warnings_of(silos), *run_warnings(config)]:
            print(f"warning: {line}", file=sys.stderr)  # noqa: T201


#: The fewest rows a silo needs: below this its chains cannot mix over two clusters and its local posterior
#: cannot be summarised (the sampler would fail after the other silos had sampled).
MIN_SILO_ROWS = 3


def _refuse_from_sizes(args, silos, config) -> None:
    method = getattr(args, "method", "vcmc")
    if method != "fed-kmodes" and config.prior.n_components < 2:
        raise ConfigError(f"--components must be at least 2 for --method {method}; got "
                          f"{config.prior.n_components}: with one component each silo is one cluster, and the "
                          "'clusters' found would be the silos themselves (fed-kmodes takes --n-clusters 1)")
    small = [s for s in silos if s.n_rows < MIN_SILO_ROWS]
    if small:
        listed = ", ".join(f"{s.source or s.name} ({s.n_rows} rows)" for s in small)
        raise ConfigError(f"silo(s) {listed} have fewer than {MIN_SILO_ROWS} rows: too few to cluster; merge "
                          "them with another silo or leave them out")
    m = int(config.privacy.min_cluster_size)
    if m > 1 and all(s.n_rows < m for s in silos):
        biggest = max(s.n_rows for s in silos)
        raise ConfigError(f"--min-cluster-size {m} is larger than every silo (the largest has {biggest} rows): no "
                          f"silo could send a cluster; expected at most {biggest}")
    under = [s for s in silos if s.n_rows < m]
    if under and getattr(args, "min_silos", None) is None:
        # the silo would refuse inside its summarize step, after the others had sampled
        listed = ", ".join(f"{s.source or s.name} ({s.n_rows} rows)" for s in under)
        raise ConfigError(f"silo(s) {listed} have fewer rows than --min-cluster-size {m}: no cluster of theirs could "
                          "leave the silo under its disclosure limit; leave them out or merge them, lower "
                          f"--min-cluster-size, or give --min-silos {len(silos) - len(under)} to go on without them")


def data_warnings_of(silos) -> list[str]:
    from vcmc.data.checks import data_warnings

    return data_warnings(silos)


def run_warnings(config) -> list[str]:
    """ESS targets the run cannot reach, said before it samples."""
    s = config.sampler
    kept = s.n_kept * s.n_chains
    out = []
    if kept <= s.target_ess:
        # an ESS above the number of draws needs anti-correlated draws, which a Gibbs sampler does not give
        auto = str(s.stop) == "converged"
        how = f"--max-iterations {s.n_iter}" if auto else f"{s.n_iter} iterations"
        then = ("--iterations auto cannot stop on convergence: raise --max-iterations" if auto else
                "the convergence check in result.json and the report will fail: raise --iterations")
        out.append(f"with {how} a silo keeps {kept} draws after burn-in ({s.n_chains} chain(s), thin {s.thin}), "
                   f"so its ESS cannot reach the target {s.target_ess:g} (sampler.target-ess); {then}, or "
                   "lower --thin or sampler.target-ess")
    return out


def choose_seed(args, out, key_of) -> int:
    """``--seed``, else the seed of the same run in ``out`` (it resumes), else a new one
    (``vcmc.outputs.runkey.choose_seed``, shared with the other commands)."""
    from vcmc.outputs.runkey import choose_seed as choose

    return choose(args.seed, out, key_of)


def result_warnings(out, config) -> list[str]:
    """What the report shows that a user must not miss, for the console: failed posterior predictive
    checks, silos whose chains did not converge, a silo whose rows all fall into one cluster; each with the
    command that shows more."""
    import json
    from pathlib import Path

    try:
        result = json.loads((Path(out) / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    more = f"see `vcmc report {out}`"
    diag = result.get("diagnostics") or {}
    lines = []
    ppc = diag.get("ppc") or {}
    for check, what in (("prevalence", "modality prevalences"), ("pairs", "pairs of modalities")):
        p = (ppc.get(check) or {}).get("p_value")
        if isinstance(p, int | float) and p < 0.05:
            n = ppc[check].get("n_pairs", ppc[check].get("n_entries"))
            lines.append(f"the posterior predictive check of {what} failed (p = {p:.2f}"
                         f"{f' over {n} checks' if n else ''}): the model misses structure in the data; {more} "
                         "(posterior predictive checks), or try more --components")
    s = config.sampler
    local = diag.get("local")
    # per-silo chain diagnostics by name; comparators keep other local diagnostics (FedMerDel: a list of ELBO traces)
    for silo, d in (local.items() if isinstance(local, dict) else ()):
        # converged == 0: --iterations auto said it already, naming what failed
        if not isinstance(d, dict) or d.get("converged") == 0.0:
            continue
        rhat, ess = d.get("rhat_log_posterior"), d.get("ess_bulk_log_posterior")
        bad_rhat = isinstance(rhat, int | float) and rhat > s.target_rhat
        bad_ess = isinstance(ess, int | float) and ess < s.target_ess
        if bad_rhat or bad_ess:
            said = [f"R-hat {rhat:.3f} > {s.target_rhat:g}" if bad_rhat else "",
                    f"ESS {ess:.0f} < {s.target_ess:g}" if bad_ess else ""]
            lines.append(f"silo {silo!r} did not converge ({', '.join(x for x in said if x)}, log posterior); "
                         f"{more} (convergence), or raise --iterations / use --iterations auto")
    stability = (diag.get("rounds") or {}).get("stability") or {}
    if stability and not stability.get("stable", True):
        said = next((w for w in diag.get("warnings", []) if "did not settle" in w or "did not agree" in w),
                    "the rounds did not settle")
        lines.append(f"{said}; {more} (rounds)")
    clusters = result.get("clusters") or []
    if sum(1 for c in clusters if c.get("size", 0) > 0) > 1:
        for silo in result.get("silos", []):
            sizes = [c.get("size_per_silo", {}).get(silo, 0) for c in clusters]
            if sum(sizes) > 1 and max(sizes) == sum(sizes):
                lines.append(f"silo {silo!r}: all its {sum(sizes)} rows fall into one cluster "
                             f"({1 + sizes.index(max(sizes))}): it may differ from the other silos as a whole "
                             f"(a coding or population difference) rather than by its people; {more} "
                             "(per-silo contributions)")
    return lines


def say_result_warnings(out, config) -> None:
    for line in result_warnings(out, config):
        print(f"warning: {line}", file=sys.stderr)  # noqa: T201
