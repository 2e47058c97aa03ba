"""Ways to make the rounds mix faster per round, measured on the real-data suite (issue 43) and not kept.

The rounds are the pooled model's blocked Gibbs sampler, one sweep per round (docs/design.md §16). At 1,000 rounds
they end, seed after seed, in different modes on wvs-usa, YRBSS and nass-cds. This probe measures what more
mixing per round could come from, with the product's code unchanged (each move is patched in for its run):

* ``rounds``: variants of the federated rounds through ``rounds_plans.py`` (same one-shot pass, same references):

  - ``merge-UNTIL-MIN``: burn-in merges. In rounds 2 .. UNTIL, each chain's pooled counts are scanned for pairs of
    components holding at least MIN rows each whose rows the data say share one profile (the Bayes factor of one
    profile against two, profiles integrated out, weights left aside, above 1; disjoint pairs, most decisive first);
    the pair is counted as one before the draw, so the next sweep moves the second's rows. Computable from the
    pooled sums alone (no exchange), a burn-in move (the kept rounds stay exact).
  - ``local-M-UNTIL``: burn-in local sweeps. In rounds 2 .. UNTIL each silo sweeps its rows M times per round: the
    round's sweep at the pooled draw, then M - 1 more at weights and profiles drawn from the other participants'
    counts of the last round (the pooled vector minus its own) plus its own current ones. Concurrent updates against
    stale counts (as approximate distributed LDA) are not the pooled chain, so only burn-in rounds make them.

* ``pooled``: samplers on the pooled rows (numpy and numba, no federation), from a random start, for how many sweeps
  the model itself needs: ``collapsed`` (weights and profiles integrated out, every row every sweep), ``turns``
  (the exact silo-by-silo scan proposed in issue 43's notes: round r re-draws silo r mod S's rows M times, collapsed,
  given the other silos' counts; the others wait), ``tempered`` (blocked Gibbs with likelihood-tempered parallel
  chains and swaps of neighbours, every swap computable from pooled counts and the shared draws), ``value-split``
  (blocked Gibbs followed by ``--moves`` Metropolis-Hastings moves per sweep that split a component by one item's
  value into an empty component, or merge two components where one is a value class of their union: the
  acceptance needs only pooled counts and the piece's counts, so a federated version would fit in the round's one
  message; the moves draw from their own stream, so ``--moves 0`` is the same chain without them), and
  ``full-mcmc`` (``vcmc.fit(method="full-mcmc")`` at the given iterations).

    .venv/bin/python benchmarks/mixing_probe.py rounds --data-python PY --cache DIR --datasets wvs-usa \
        --seeds 1 2 3 --variants merge-125-30 local-10-125 --out merges.json
    .venv/bin/python benchmarks/mixing_probe.py pooled --cache DIR --dataset wvs-usa --sampler turns \
        --sweeps 1000 --local 10 --seeds 1 2 3 --out turns.json
    .venv/bin/python benchmarks/mixing_probe.py summarise FILE.json ...     # the markdown tables of the README

Results and the commands that made them: docs/results/real/rounds/mixing/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import rounds_plans as rp  # noqa: E402
from _provenance import commit  # noqa: E402

FIXED_1000 = {"plan.stop": False, "plan.checkpoints": [250, 500, 1000]}


# -- the rounds' moves, patched in for a variant's run ----------------------------------------------------------


def _log_marginal_profiles(ct: np.ndarray, beta: np.ndarray, n_modalities) -> np.ndarray:
    """``log p(x | z)`` of each row of counts ``ct`` (..., P), profiles integrated out (Dirichlet-multinomial)."""
    from scipy.special import gammaln

    from vcmc.model import profile_offsets

    starts = profile_offsets(n_modalities)[:-1]
    beta_sum = np.add.reduceat(beta, starts)
    block = np.add.reduceat(ct, starts, axis=-1)
    return (np.sum(gammaln(beta_sum) - gammaln(beta_sum + block), axis=-1)
            + np.sum(gammaln(beta + ct) - gammaln(beta), axis=-1))


def profile_merges(cluster, modality, plan, min_rows: int) -> list[tuple[int, int]]:
    """Disjoint pairs ``(keep, absorb)`` of components with at least ``min_rows`` rows each whose one-profile Bayes
    factor exceeds 1, the most decisive first (categorical items)."""
    n = np.asarray(cluster, dtype=np.float64)
    ct = np.asarray(modality, dtype=np.float64)
    big = np.flatnonzero(n >= max(int(min_rows), 1))
    if big.size < 2:
        return []
    single = _log_marginal_profiles(ct[big], plan.beta(), plan.n_modalities)
    i, j = np.triu_indices(big.size, k=1)
    log_bf = _log_marginal_profiles(ct[big][i] + ct[big][j], plan.beta(), plan.n_modalities) - single[i] - single[j]
    pairs, used = [], set()
    for t in np.argsort(-log_bf, kind="stable"):
        if log_bf[t] <= 0:
            break
        a, b = int(big[i[t]]), int(big[j[t]])
        if a not in used and b not in used:
            used.update((a, b))
            pairs.append((a, b) if n[a] >= n[b] else (b, a))
    return pairs


@contextlib.contextmanager
def burn_in_merges(until: int, min_rows: int):
    from vcmc.pooled.chain import PooledChain

    original = PooledChain._aligned_draw

    def aligned_draw(self, r_next, ch, cluster, modality, gauss=None):
        if r_next <= until and gauss is None:
            pairs = profile_merges(cluster, modality, self.plan, min_rows)
            if pairs:
                cluster, modality = np.array(cluster, dtype=np.float64), np.array(modality, dtype=np.float64)
                for keep, absorb in pairs:
                    for arr in (cluster, modality):
                        arr[keep] += arr[absorb]
                        arr[absorb] = 0
                self.__dict__.setdefault("probe_merges", []).append(
                    {"round": int(r_next), "chain": int(ch), "pairs": pairs})
        return original(self, r_next, ch, cluster, modality, gauss)

    PooledChain._aligned_draw = aligned_draw
    try:
        yield
    finally:
        PooledChain._aligned_draw = original


@contextlib.contextmanager
def burn_in_local_sweeps(sweeps: int, until: int):
    from vcmc.pooled.chain import PooledChain
    from vcmc.pooled.gibbs import draw_parameters
    from vcmc.rows import rounds as rows_rounds

    advance, aligned_draw, sweep = PooledChain.advance, PooledChain._aligned_draw, rows_rounds.sweep

    def advance_noting_counts(self, counts, round_number=None):
        self.probe_counts = [(np.asarray(c[0], dtype=np.float64), np.asarray(c[1], dtype=np.float64))
                             for c in counts]
        return advance(self, counts, round_number)

    def aligned_draw_noting_perm(self, r_next, ch, cluster, modality, gauss=None):
        out = aligned_draw(self, r_next, ch, cluster, modality, gauss)
        self.__dict__.setdefault("probe_perm", {})[ch] = out[3]
        return out

    def local_sweep(silo, chain, log_pi, log_profiles, **kw):
        pooled = silo.chain
        local = pooled.round <= until and kw.get("gaussian") is None
        own = rows_rounds.allocation_counts(silo, chain) if local else None
        table = sweep(silo, chain, log_pi, log_profiles, **kw)
        if not local:
            return table
        cluster, modality = pooled.probe_counts[chain]
        others, others_ct = cluster - own[0], modality - own[1]
        perm = pooled.probe_perm.get(chain)
        if perm is not None:     # the draw's labels are the counts' labels permuted by the alignment
            others, others_ct = others[perm], others_ct[perm]
        plan, rng = pooled.plan, kw["rng"]
        for _ in range(1, sweeps):
            lp, lth = draw_parameters(others + table[0], others_ct + table[1], alpha=plan.alpha,
                                      beta_cols=plan.beta(), n_modalities=plan.n_modalities, rng=rng)
            table = sweep(silo, chain, lp, lth, store=False, rng=rng,
                          inverse_temperature=kw.get("inverse_temperature", 1.0))
        return table

    PooledChain.advance, PooledChain._aligned_draw = advance_noting_counts, aligned_draw_noting_perm
    rows_rounds.sweep = local_sweep
    try:
        yield
    finally:
        PooledChain.advance, PooledChain._aligned_draw, rows_rounds.sweep = advance, aligned_draw, sweep


def _variant_patch(name: str):
    kind, a, b = name.split("-")
    if kind == "merge":
        return burn_in_merges(until=int(a), min_rows=int(b))
    if kind == "local":
        return burn_in_local_sweeps(sweeps=int(a), until=int(b))
    raise ValueError(name)


def rounds_main(argv) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", required=True)
    known, rest = ap.parse_known_args(argv)
    original = rp.run_variant
    for name in known.variants:     # the probe's moves; any other name is rounds_plans.py's own variant
        if name.startswith(("merge-", "local-")):
            rp.VARIANTS[name] = {**FIXED_1000, "probe.patch": name}

    def run_variant(transport, summaries, mapping, variant, seed, cplus):
        name = variant.get("probe.patch")
        body = {k: v for k, v in variant.items() if k != "probe.patch"}
        with _variant_patch(name) if name else contextlib.nullcontext():
            return original(transport, summaries, mapping, body, seed, cplus)

    rp.run_variant = run_variant
    rp.main([*rest, "--variants", *known.variants])


# -- samplers on the pooled rows -----------------------------------------------------------------------------


def _pooled_rows(cache: Path, name: str):
    from vcmc.data import Schema, read_csv

    folder = cache / name
    data = rp.prepared(folder)
    schema = Schema.from_json(folder / "schema.json")
    silos = [read_csv(p, schema=schema, name=p.stem) for p in data["files"]]
    nm = np.asarray(silos[0].n_modalities, dtype=np.int64)
    x = np.full((data["n_rows"], nm.size), -1, dtype=np.int64)
    silo_of = np.zeros(data["n_rows"], dtype=np.int64)
    for s, silo in enumerate(silos):
        x[data["index"][silo.name]] = silo.codes
        silo_of[data["index"][silo.name]] = s
    return folder, data, silos, nm, x, silo_of


def _collapsed_kernel():
    import numba

    @numba.njit(cache=True)
    def sweep(rows, x, z, n, ct, nq, off, bcol, bsum, alpha, u, acc, store):
        q_items, c_comp = x.shape[1], n.size
        lp = np.empty(c_comp)
        for t in range(rows.size):
            i = rows[t]
            k = z[i]
            n[k] -= 1
            for q in range(q_items):
                if x[i, q] >= 0:
                    ct[k, off[q] + x[i, q]] -= 1
                    nq[k, q] -= 1
            mx = -1e300
            for c in range(c_comp):
                v = np.log(n[c] + alpha)
                for q in range(q_items):
                    if x[i, q] >= 0:
                        v += np.log((ct[c, off[q] + x[i, q]] + bcol[off[q] + x[i, q]]) / (nq[c, q] + bsum[q]))
                lp[c] = v
                mx = max(mx, v)
            tot = 0.0
            for c in range(c_comp):
                lp[c] = np.exp(lp[c] - mx)
                tot += lp[c]
            if store:
                for c in range(c_comp):
                    acc[i, c] += lp[c] / tot
            r, k, cum = u[t] * tot, c_comp - 1, 0.0
            for c in range(c_comp):
                cum += lp[c]
                if r < cum:
                    k = c
                    break
            z[i] = k
            n[k] += 1
            for q in range(q_items):
                if x[i, q] >= 0:
                    ct[k, off[q] + x[i, q]] += 1
                    nq[k, q] += 1

    return sweep


def _collapsed(x, silo_of, nm, sweeps, local, mode, rng, c_comp, alpha, bcol):
    """Collapsed Gibbs from a random start; memberships: the rows' conditional probabilities averaged over the
    second half (``collapsed``), or their allocations counted there (``turns``: a silo's rows are re-drawn only in
    its turns)."""
    sweep = _collapsed_kernel()
    n_rows, q_items = x.shape
    off = np.concatenate([[0], np.cumsum(nm)]).astype(np.int64)
    bsum = np.add.reduceat(bcol, off[:-1])
    z = rng.integers(0, c_comp, n_rows)
    n = np.bincount(z, minlength=c_comp).astype(np.float64)
    ct, nq = np.zeros((c_comp, off[-1])), np.zeros((c_comp, q_items))
    for q in range(q_items):
        ok = x[:, q] >= 0
        np.add.at(ct, (z[ok], off[q] + x[ok, q]), 1)
        np.add.at(nq, (z[ok], q), 1)
    acc = np.zeros((n_rows, c_comp))
    by_silo = [np.flatnonzero(silo_of == s) for s in range(int(silo_of.max()) + 1)]
    for r in range(sweeps):
        store = r >= sweeps // 2
        if mode == "collapsed":
            sweep(rng.permutation(n_rows), x, z, n, ct, nq, off, bcol, bsum, alpha, rng.random(n_rows), acc, store)
            continue
        rows = by_silo[r % len(by_silo)]
        for _ in range(local):
            sweep(rows, x, z, n, ct, nq, off, bcol, bsum, alpha, rng.random(rows.size), acc, False)
        if store:
            acc[np.arange(n_rows), z] += 1
    return acc.argmax(axis=1), None


class _BlockedRows:
    """The pooled rows as a one-hot matrix, and the blocked Gibbs steps the pooled-row samplers share: counts of an
    allocation, a draw of the weights and profiles (the likelihood raised to ``power``), a sweep of the rows, and the
    memberships of the untempered chain over the second half, each draw aligned to the mean of the kept profiles."""

    def __init__(self, x, nm, c_comp: int, alpha: float, bcol: np.ndarray):
        import scipy.sparse as sp

        self.n_rows, self.q_items = x.shape
        self.off = np.concatenate([[0], np.cumsum(nm)]).astype(np.int64)
        rows, cols = np.nonzero(x >= 0)
        self.onehot = sp.csr_matrix((np.ones(rows.size), (rows, self.off[cols] + x[rows, cols])),
                                    shape=(self.n_rows, self.off[-1]))
        self.c_comp, self.alpha, self.bcol = c_comp, alpha, bcol
        self.acc, self.ref, self.n_kept = np.zeros((self.n_rows, c_comp)), None, 0

    def counts(self, z):
        import scipy.sparse as sp

        alloc = sp.csr_matrix((np.ones(self.n_rows), (z, np.arange(self.n_rows))), shape=(self.c_comp, self.n_rows))
        return np.bincount(z, minlength=self.c_comp).astype(np.float64), np.asarray((alloc @ self.onehot).todense())

    def draw(self, n, ct, rng, power: float = 1.0):
        """``(log theta, the rows' log weights)`` drawn from the counts (weights first, then profiles)."""
        g = rng.gamma(self.alpha + n)
        lpi = np.log(np.maximum(g, 1e-300)) - np.log(g.sum())
        gg = np.maximum(rng.gamma(self.bcol[None, :] + power * ct), 1e-300)
        lth = np.log(gg)
        for q in range(self.q_items):
            lth[:, self.off[q]:self.off[q + 1]] -= np.log(gg[:, self.off[q]:self.off[q + 1]].sum(axis=1, keepdims=True))
        return lth, lpi[None, :] + power * (self.onehot @ lth.T)

    def keep(self, lth, logits) -> None:
        from scipy.optimize import linear_sum_assignment
        from scipy.spatial.distance import cdist

        perm = np.arange(self.c_comp)
        if self.ref is not None:
            r_, c_ = linear_sum_assignment(cdist(np.exp(lth), self.ref, "cityblock"))
            perm[c_] = r_
        lp = logits[:, perm]
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        self.acc += p / p.sum(axis=1, keepdims=True)
        self.n_kept += 1
        prof = np.exp(lth[perm])
        self.ref = prof if self.ref is None else (self.ref * (self.n_kept - 1) + prof) / self.n_kept

    def sweep(self, logits, rng):
        return (logits - np.log(-np.log(rng.random((self.n_rows, self.c_comp))))).argmax(axis=1)

    def labels(self):
        return self.acc.argmax(axis=1)


def _tempered(x, nm, sweeps, betas, rng, c_comp, alpha, bcol):
    """Blocked Gibbs with likelihood-tempered chains (target ``p(pi) p(theta) p(z | pi) p(x | z, theta)^b``) and
    swaps of neighbours after every sweep; memberships of the chain at b = 1 over the second half, aligned."""
    rows = _BlockedRows(x, nm, c_comp, alpha, bcol)
    m = len(betas)
    z = [rng.integers(0, c_comp, rows.n_rows) for _ in range(m)]
    state = [rows.counts(zz) for zz in z]
    swaps, tries = 0, 0
    for it in range(sweeps):
        ell = np.zeros(m)
        for j in range(m):
            lth, logits = rows.draw(*state[j], rng, betas[j])
            if j == 0 and it >= sweeps // 2:
                rows.keep(lth, logits)
            z[j] = rows.sweep(logits, rng)
            state[j] = rows.counts(z[j])
            ell[j] = float(np.sum(state[j][1] * lth))     # log p(x | z, theta) at the draw just swept
        for j in (range(m - 1) if it % 2 == 0 else range(m - 2, -1, -1)):
            tries += 1
            if np.log(rng.random()) < (betas[j] - betas[j + 1]) * (ell[j + 1] - ell[j]):
                state[j], state[j + 1], ell[j], ell[j + 1] = state[j + 1], state[j], ell[j + 1], ell[j]
                swaps += 1
    return rows.labels(), swaps / max(tries, 1)


def _value_split(x, nm, sweeps, moves, rng, move_rng, c_comp, alpha, bcol):
    """Blocked Gibbs, each sweep followed by ``moves`` value split-merge moves (Metropolis-Hastings on the allocation
    with weights and profiles integrated out, from counts); memberships as ``_tempered``'s at b = 1."""
    from vcmc.pooled.gibbs import log_joint

    rows = _BlockedRows(x, nm, c_comp, alpha, bcol)
    q_items = rows.q_items
    column_weight = np.concatenate([np.full(k, 1.0 / (q_items * k)) for k in nm])   # P(choose item q, value v)

    def lj(n, ct):
        return log_joint(n, ct, alpha=alpha, beta_cols=bcol, n_modalities=nm)

    def value_classes(n, ct, keep, piece):
        # the (q, v) whose rows of keep + piece with x_q = v are exactly piece's rows: counts alone tell
        return float(np.sum(column_weight[(ct[piece] == n[piece]) & (ct[keep] == 0)]))

    z = rng.integers(0, c_comp, rows.n_rows)
    n, ct = rows.counts(z)
    took = {"split": 0, "merge": 0}
    for it in range(sweeps):
        lth, logits = rows.draw(n, ct, rng)
        if it >= sweeps // 2:
            rows.keep(lth, logits)
        z = rows.sweep(logits, rng)
        n, ct = rows.counts(z)
        for _ in range(moves):
            occupied, empty = np.flatnonzero(n > 0), np.flatnonzero(n == 0)
            k = occupied.size
            if move_rng.random() < 0.5:      # split a by item q's value v into an empty component e
                if empty.size == 0:
                    continue
                a, q = move_rng.choice(occupied), move_rng.integers(q_items)
                v, e = move_rng.integers(nm[q]), move_rng.choice(empty)
                piece = (z == a) & (x[:, q] == v)
                m = int(piece.sum())
                if m == 0 or m == n[a]:
                    continue
                n2, ct2 = n.copy(), ct.copy()
                piece_ct = np.asarray(rows.onehot[piece].sum(axis=0)).ravel()
                n2[a] -= m
                n2[e] += m
                ct2[a] -= piece_ct
                ct2[e] += piece_ct
                forward = -np.log(k) + np.log(value_classes(n2, ct2, a, e)) - np.log(empty.size)
                reverse = -np.log((k + 1) * k)
                if np.log(move_rng.random()) < lj(n2, ct2) - lj(n, ct) + reverse - forward:
                    z[piece], n, ct = e, n2, ct2
                    took["split"] += 1
            elif k >= 2:                     # merge e into a where e is a value class of their union
                a, e = move_rng.choice(occupied, 2, replace=False)
                w = value_classes(n, ct, a, e)
                if w == 0:
                    continue
                n2, ct2 = n.copy(), ct.copy()
                n2[a] += n2[e]
                ct2[a] += ct2[e]
                n2[e], ct2[e] = 0, 0
                forward = -np.log(k * (k - 1))
                reverse = -np.log(k - 1) + np.log(w) - np.log(empty.size + 1)
                if np.log(move_rng.random()) < lj(n2, ct2) - lj(n, ct) + reverse - forward:
                    z[z == e], n, ct = a, n2, ct2
                    took["merge"] += 1
    return rows.labels(), took


def pooled_main(argv) -> None:
    import vcmc
    from vcmc.atomic import atomic_write_text
    from vcmc.config import PriorConfig, config_from_mapping
    from vcmc.metrics import adjusted_rand_index
    from vcmc.model import beta_per_column

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--sampler", choices=["collapsed", "turns", "tempered", "value-split", "full-mcmc"], required=True)
    ap.add_argument("--sweeps", type=int, default=1000)
    ap.add_argument("--local", type=int, default=10, help="turns: a silo's sweeps per turn")
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 0.8, 0.64, 0.5], help="tempered: the ladder")
    ap.add_argument("--moves", type=int, default=5, help="value-split: moves per sweep (0: blocked Gibbs alone)")
    ap.add_argument("--components", type=int, default=None, help="C (default prior.n_components)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--reference-seeds", type=int, default=6)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    folder, data, silos, nm, x, silo_of = _pooled_rows(args.cache, args.dataset)
    refs = rp.reference(args.dataset, folder, data, args.reference_seeds, 10_000, None)
    prior = PriorConfig()
    bcol = beta_per_column(prior.beta, nm).astype(np.float64)
    results = json.loads(args.out.read_text()) if args.out.exists() else {"runs": {}}
    results["command"], results["commit"] = " ".join(sys.argv), commit()
    for seed in args.seeds:
        rng, t0, extra = np.random.default_rng(seed), time.perf_counter(), None
        if args.sampler == "full-mcmc":
            res = vcmc.fit(silos, method="full-mcmc", rng=seed, config=config_from_mapping(
                {"sampler.n-iter": args.sweeps, "assessment.enabled": False}))
            labels = np.full(data["n_rows"], -1, dtype=np.int64)
            for s, silo in enumerate(res.silos):
                labels[data["index"][silo]] = res.assignments[s]
        elif args.sampler == "tempered":
            labels, extra = _tempered(x, nm, args.sweeps, args.betas, rng, prior.n_components, prior.alpha, bcol)
        elif args.sampler == "value-split":
            labels, extra = _value_split(x, nm, args.sweeps, args.moves, rng, np.random.default_rng(seed + 10_000),
                                         args.components or prior.n_components, prior.alpha, bcol)
        else:
            labels, extra = _collapsed(x, silo_of, nm, args.sweeps, args.local, args.sampler, rng,
                                       prior.n_components, prior.alpha, bcol)
        aris = [adjusted_rand_index(refs[r], labels) for r in sorted(refs)]
        k = int(np.sum(np.bincount(np.unique(labels, return_inverse=True)[1]) >= prior_min_size()))
        entry = {"ari_median": float(np.median(aris)), "k": k, "seconds": round(time.perf_counter() - t0, 1)}
        if isinstance(extra, dict):
            entry["moves_accepted"] = extra
        elif extra is not None:
            entry["swap_rate"] = round(float(extra), 3)
        detail = {"turns": f"|local {args.local}", "tempered": f"|betas {args.betas}",
                  "value-split": f"|moves {args.moves} C {args.components or prior.n_components}"}.get(args.sampler, "")
        key = f"{args.dataset}|{args.sampler}|{args.sweeps}{detail}|{seed}"
        results["runs"][key] = entry
        print(key, entry, flush=True)
        atomic_write_text(args.out, json.dumps(results, indent=1))


def prior_min_size() -> int:
    from vcmc.config import PrivacyConfig

    return int(PrivacyConfig().min_cluster_size)


def summarise_main(paths) -> None:
    """Per dataset and variant (``rounds`` and ``rounds_plans.py`` files) the seeds' ARI and K and whether the real-data
    must-show holds on ARI and K (median >= the reference pairs' median - 0.05, every seed >= that - 0.1, K within 1
    of the reference's median; settling apart); per dataset, sampler and sweeps (``pooled`` files) the seeds' ARI."""
    runs, refs, pooled = {}, {}, {}
    for path in paths:
        d = json.loads(Path(path).read_text())
        refs.update(d.get("reference", {}))
        (runs if "reference" in d else pooled).update(d["runs"])
    by = {}
    for key, e in runs.items():
        name, variant, seed = key.split("|")
        by.setdefault((name, variant), {})[int(seed)] = e
    lines = ["| dataset | floor; reference K | variant | ARI of the seeds (K) | settled | passes on ARI and K |",
             "| --- | --- | --- | --- | --- | --- |"] if by else []
    for (name, variant), seeds in by.items():
        r = refs[name]
        floor, k_ref = r["ari_pairs_median"], float(np.median(r["k"]))
        got = [seeds[s] for s in sorted(seeds)]
        aris, ks = [e["ari_median"] for e in got], [e["k"] for e in got]
        ok = (np.median(aris) >= floor - 0.05 and min(aris) >= floor - 0.1 and all(abs(k - k_ref) <= 1 for k in ks))
        lines.append(f"| {name} | {floor:.3f}; {k_ref:g} | {variant} | "
                     + ", ".join(f"{a:.3f} ({k})" for a, k in zip(aris, ks, strict=True))
                     + f" | {sum(bool(e['settled']) for e in got)} of {len(got)} | {'yes' if ok else 'no'} |")
    if pooled:
        lines += [*([""] if lines else []), "| dataset | sampler | sweeps | ARI of the seeds (K) |",
                  "| --- | --- | --- | --- |"]
        grouped = {}
        for key, e in pooled.items():
            *head, seed = key.split("|")
            grouped.setdefault(tuple(head), []).append(e)
        for head, es in grouped.items():
            lines.append(f"| {head[0]} | {' '.join(head[1:2] + head[3:])} | {head[2]} | "
                         + ", ".join(f"{e['ari_median']:.3f} ({e['k']})" for e in es) + " |")
    print("\n".join(lines))  # noqa: T201


if __name__ == "__main__":
    {"rounds": rounds_main, "pooled": pooled_main, "summarise": summarise_main}[sys.argv[1]](sys.argv[2:])
