"""Which of the rounds' two chains should be the answer? Per chain: its answer's ARI to full MCMC, and the
quantities a choice could be made by, on the real-data suite (analyst's session, in process).

For each chain of the default plan at its fixed 1,000 rounds (the stopping rule recorded, not applied) this
records, over the last window: the mean collapsed log joint (the default's choice), the mean entropy of the rows'
allocation probabilities at the stored rounds (summed over the silos), the log of the labellings of its K
components among C (``log C! / (C - K)!``), its own split R-hat, its K, and the ARI of the labels it would give
(``vcmc.rows.rounds.finish`` on that chain). The sum of the first three is a lower bound of the log posterior mass
of the chain's mode (the entropy of the allocation given the parameters is at most that of the allocation).

    python benchmarks/rounds_choice.py --cache <cache of rounds_plans.py> --datasets nhefs yrbss --seeds 1 2 3 \
        --out choice.json
    ... --start-from full-100000-0-1.npy --long-reference 100000 --seeds 1 --out start.json

``--start-from``: both chains start from full-data MCMC's answer instead of the one-shot pass's partition (do the
rounds keep the reference's mode?); with ``--components 15`` the rounds' model has full MCMC's C (no births).
``--variant default-fixed-4000``: the same at 4,000 rounds. Each chain's ``merged`` fields: its answer with the
components the calibrated matching's closeness test cannot tell apart merged (are the extra components copies?).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _provenance import commit  # noqa: E402
from real_data import DATASETS  # noqa: E402
from rounds_plans import VARIANTS, one_shot, prepared, reference, run_variant  # noqa: E402


def main(argv=None) -> None:
    import arviz as az

    from vcmc.atomic import atomic_write_text
    from vcmc.closeness import DEFAULT_LEVEL, closeness_statistic, closeness_threshold, constrained_groups
    from vcmc.family import CATEGORICAL
    from vcmc.mcmc.sampler.round_kernels import pattern_probabilities
    from vcmc.metrics import adjusted_rand_index
    from vcmc.rows import rounds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--variant", default="default-fixed-1000")
    ap.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    ap.add_argument("--cache", type=Path, default=Path(".cache/real"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--long-reference", type=int, default=None, metavar="ITERATIONS",
                    help="also full-data MCMC at this many iterations with seeds 1 and 2 (cached): their K, their "
                         "agreement and their ARI to the reference seeds")
    ap.add_argument("--start-from", default=None,
                    help="start both chains from these pooled labels (a .npy under the dataset's cache folder, e.g. "
                         "full-100000-0-1.npy: full MCMC's answer) instead of the one-shot pass's partition")
    ap.add_argument("--components", type=int, default=None,
                    help="with --start-from: the rounds' model with this many components (full MCMC's C+ = 15) instead "
                         "of the start's and the births'")
    args = ap.parse_args(argv)
    if args.components and not args.start_from:
        ap.error("--components needs --start-from (the one-shot start may use more components)")

    entropies: dict = {}
    original = rounds.sweep

    def sweep(silo, chain, log_pi, log_profiles, *, store, **kw):
        if store:
            st = rounds.require(silo)
            w = pattern_probabilities(st.layout.pat_start, st.layout.pexc_start, st.layout.pexc, st.layout.ecol,
                                      st.layout.evar, st.layout.base_col, np.ascontiguousarray(log_pi),
                                      np.ascontiguousarray(log_profiles))
            mult = np.diff(st.layout.pat_start)
            h = -np.sum(mult[:, None] * np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0))
            entropies.setdefault((silo.name, chain), []).append(float(h))
        return original(silo, chain, log_pi, log_profiles, store=store, **kw)

    rounds.sweep = sweep
    start_labels: dict = {}
    original_start = rounds.start

    def start(silo, *a, **kw):
        tables = original_start(silo, *a, **kw)
        if not start_labels:
            return tables
        st = rounds.require(silo)
        st.z[:] = start_labels[silo.name][None, :]
        return [rounds.allocation_counts(silo, ch) for ch in range(st.z.shape[0])]

    rounds.start = start
    if args.components:
        from vcmc.rounds import stage

        plan_of = stage.plan_of

        def with_components(*a, **kw):
            fields = plan_of(*a, **kw)
            c = int(args.components)
            # the start map only has to be valid: the rows' allocations are replaced by --start-from's
            return {**fields, "n_components": c, "start": np.minimum(fields["start"], c - 1), "birth_budget": 0}

        stage.plan_of = with_components
    results = json.loads(args.out.read_text()) if args.out.exists() else {"runs": {}}
    results["command"], results["commit"] = " ".join(sys.argv), commit()
    mapping = {"sampler.n-iter": 10_000, "assessment.enabled": False}
    for name in args.datasets:
        folder = args.cache / name
        data = prepared(folder)                 # rounds_plans.py prepares the dataset and its reference seeds
        refs = reference(name, folder, data, 6, 10_000, None)
        seeds = sorted(refs)
        pairs = [adjusted_rand_index(refs[a], refs[b]) for i, a in enumerate(seeds) for b in seeds[i + 1:]]
        k_ref = [int(np.unique(refs[s]).size) for s in seeds]
        if args.long_reference:
            long = reference(name, folder, data, 2, args.long_reference, None)
            results.setdefault("long_reference", {})[name] = {
                "iterations": args.long_reference, "k": [int(np.unique(long[s]).size) for s in (1, 2)],
                "ari_between": float(adjusted_rand_index(long[1], long[2])),
                "ari_to_reference": {s: [float(adjusted_rand_index(long[s], refs[r])) for r in seeds] for s in (1, 2)}}
            print(f"{name}: full MCMC at {args.long_reference} iterations: {results['long_reference'][name]}",
                  flush=True)
        if args.start_from:
            pooled = np.load(folder / args.start_from)
            start_labels.update({silo: pooled[idx] for silo, idx in data["index"].items()})
        for seed in args.seeds:
            transport, summaries, _ = one_shot(folder, data, mapping, seed)
            with transport:
                entropies.clear()
                result, secs = run_variant(transport, summaries, mapping, VARIANTS[args.variant], seed, 15)
                silos = [transport.silo(n) for n in result.silos]
                chain = silos[0].chain
                plan = chain.plan
                first, last = plan.window(chain.window)
                per_chain = []
                for ch in range(plan.n_chains):
                    lj = np.asarray(chain.trace_lj[ch][first:last])
                    ks = np.asarray(chain.trace_kbig[ch][first:last])
                    k = int(np.bincount(ks).argmax())
                    n_st = len(plan.stored_rounds(chain.window))
                    h = np.sum([entropies[(s.name, ch)][-n_st:] for s in silos], axis=0)
                    half = lj.size // 2
                    rhat = float(az.rhat(np.stack([lj[:half], lj[half:2 * half]]))) if np.ptp(lj) > 0 else 1.0
                    mean_size = chain.size_sum[ch] / max(chain.n_sized, 1)
                    keep = np.flatnonzero(mean_size >= plan.min_size)
                    labels = np.full(data["n_rows"], -1, dtype=np.int64)
                    for s in silos:
                        st = s.rounds
                        m = st.summed[ch][:, keep]
                        lab = np.argmax(m, axis=1)[st.pattern_of_rows()]
                        labels[data["index"][s.name]] = lab
                    aris = [adjusted_rand_index(refs[r], labels) for r in seeds]
                    # copies: the answer's clusters whose posteriors the calibrated matching's test cannot tell apart
                    prof = np.exp(np.asarray(chain.stored_prof[ch]))[:, keep, :]
                    mean, var = CATEGORICAL.moments(prof, plan.n_modalities)
                    stat = closeness_statistic(mean, var)
                    thr = closeness_threshold(mean.shape[1], DEFAULT_LEVEL)
                    group = constrained_groups(stat, thr, np.zeros(keep.size, dtype=np.int64))
                    merged = np.full(data["n_rows"], -1, dtype=np.int64)
                    ok = labels >= 0
                    merged[ok] = group[labels[ok]]
                    aris_m = [adjusted_rand_index(refs[r], merged) for r in seeds]
                    off = stat[np.triu_indices(keep.size, 1)]
                    c = plan.n_components
                    per_chain.append({"k": k, "n_clusters": int(keep.size), "mean_lj": float(lj.mean()),
                                      "mean_entropy": float(h.mean()), "n_stored": int(h.size),
                                      "log_labellings": math.lgamma(c + 1) - math.lgamma(c - k + 1),
                                      "rhat_own": rhat, "ari_median": float(np.median(aris)),
                                      "k_merged": int(np.unique(group).size),
                                      "ari_merged": float(np.median(aris_m)),
                                      "min_t_over_threshold": float(off.min() / thr) if off.size else None})
                entry = {"chosen_ari": None, "per_chain": per_chain, "floor": float(np.median(pairs)),
                         "k_ref": k_ref, "seconds": round(secs, 1), "n_components": int(plan.n_components)}
                ours = np.full(data["n_rows"], -1, dtype=np.int64)
                for s, silo in enumerate(result.silos):
                    ours[data["index"][silo]] = result.assignments[s]
                entry["chosen_ari"] = float(np.median([adjusted_rand_index(refs[r], ours) for r in seeds]))
                results["runs"][f"{name}|{seed}"] = entry
                print(f"{name:16s} seed {seed} floor {entry['floor']:.3f} ref K {k_ref} "
                      f"chosen {entry['chosen_ari']:.3f}", flush=True)
                for ch, pc in enumerate(per_chain):
                    print(f"   chain {ch}: K {pc['k']:2d} ({pc['n_clusters']}) ARI {pc['ari_median']:.3f} "
                          f"lj {pc['mean_lj']:.1f} H {pc['mean_entropy']:.1f} lab {pc['log_labellings']:.1f} "
                          f"lj+H+lab {pc['mean_lj'] + pc['mean_entropy'] + pc['log_labellings']:.1f} "
                          f"rhat {pc['rhat_own']:.3f} merged K {pc['k_merged']} ARI {pc['ari_merged']:.3f} "
                          f"minT/thr {pc['min_t_over_threshold']:.2f}", flush=True)
                atomic_write_text(args.out, json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
