"""The round designs measured by benchmarks/rounds_probe.py, each started from the one-shot VCMC answer.

Each design is simulated in one process, but every quantity crosses the silo boundary exactly as it would in
a federation: a silo sees its own rows plus what the server broadcasts; the server sees what the silos send
(listed per design in ``sent``). Row labels never leave a silo; they are gathered here only to score the
designs against full-data MCMC.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from _rounds import server
from _rounds.gibbs import counts, sweeps


@dataclass
class Federation:
    codes: list[np.ndarray]           # one (n_s, Q) int64 array per silo, -1 = missing
    n_modalities: tuple[int, ...]
    names: list[str]
    alpha: float = 0.01               # the library's default priors (PriorConfig)
    beta: float = 0.5
    n_components: int = 15
    offsets: np.ndarray = field(init=False)

    def __post_init__(self):
        self.offsets = np.concatenate([[0], np.cumsum(self.n_modalities)]).astype(np.int64)

    @property
    def n_cols(self) -> int:
        return int(self.offsets[-1])


@dataclass
class Round:
    labels: list[np.ndarray]          # per silo, global cluster of every row (scoring only)
    k: int
    seconds: float
    sweeps: int                       # Gibbs sweeps per silo this round
    changed: int                      # rows whose global label changed since the last round
    born: int = 0
    split: int = 0
    merged: int = 0
    log_joint: float = float("nan")   # collapsed log p(X, z) of the round's partition (server, from sums)
    sent: str = ""


def _changed(old, new) -> int:
    return int(sum((a != b).sum() for a, b in zip(old, new, strict=True)))


def _relabel(labels: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Consecutive global ids 0..K-1 over the labels in use."""
    used = np.unique(np.concatenate(labels))
    lut = np.full(int(used.max()) + 1, -1, dtype=np.int64)
    lut[used] = np.arange(used.size)
    return [lut[lab] for lab in labels], int(used.size)


def pooled_log_joint(fed: Federation, labels: list[np.ndarray]) -> float:
    k = int(max(lab.max() for lab in labels)) + 1
    nc = np.zeros(k)
    ct = np.zeros((k, fed.n_cols))
    for x, lab in zip(fed.codes, labels, strict=True):
        a, b = counts(x, fed.offsets, lab, k)
        nc += a
        ct += b
    return server.log_joint(nc, ct, fed.offsets, fed.alpha, fed.beta, max(fed.n_components, k))


# ---------------------------------------------------------------------------- item 1: silo weights
def silo_weights(fed: Federation, labels: list[np.ndarray], profile_draws: np.ndarray, *, seed: int,
                 n_draws: int = 200, sweeps_per_draw: int = 5) -> tuple[list[np.ndarray], float]:
    """Each silo's own weights of the global clusters: with the profiles held at each of ``n_draws`` global
    draws, ``sweeps_per_draw`` sweeps of (weights, allocations) of its rows; a row's label is its most
    frequent cluster over the last sweep at every draw. Nothing is sent back."""
    t0 = time.perf_counter()
    t_n, k, _ = profile_draws.shape
    pick = np.linspace(0, t_n - 1, min(n_draws, t_n)).round().astype(int)
    logp = np.log(np.clip(profile_draws[pick], 1e-300, None))
    out = []
    for s, (x, lab) in enumerate(zip(fed.codes, labels, strict=True)):
        z = lab.astype(np.int64).copy()
        votes = np.zeros((x.shape[0], k), dtype=np.int64)
        for j in range(pick.size):
            _, _, v = sweeps(x, fed.offsets, np.zeros((k, fed.n_cols)), np.full(k, fed.alpha), z,
                             sweeps_per_draw, sweeps_per_draw - 1, seed * 100_003 + s * 7919 + j,
                             held_logprof=logp[j])
            votes += v
        out.append(votes.argmax(axis=1))
    return out, time.perf_counter() - t0


# ------------------------------------------------------------------ designs 1 and 2: cavity rounds
def cavity_rounds(fed: Federation, labels: list[np.ndarray], *, n_rounds: int, n_sweeps: int, n_burn: int,
                  n_births: int, splits: bool, seed: int, min_size: int = 10, ml_merges: bool = True
                  ) -> list[Round]:
    """EP-like rounds with Dirichlet site terms (the silo's expected counts per global cluster).

    Round r: the server broadcasts, per global cluster, the sum over silos of the sites of round r - 1 (and,
    with ``splits``, of the two halves of each cluster); each silo subtracts its own site to get its cavity,
    runs Gibbs over its rows with anchored components (profile prior beta + cavity, its own weights
    Dirichlet(alpha)) plus ``n_births`` free components (prior beta), warm-started from its labels, and sends
    its new site (expected counts per component, mean over the kept sweeps). The server keeps births of at
    least ``min_size`` expected rows (matched across silos by the collapsed marginal likelihood of the summed
    counts), keeps a split when that likelihood prefers the halves, and (with ``ml_merges``) merges clusters
    it prefers merged; without, a cluster goes only when no silo labels a row with it (the over-fitted
    mixture's own way of merging).
    """
    x_all, off = fed.codes, fed.offsets
    labels, k = _relabel([lab.astype(np.int64) for lab in labels])
    sites = [counts(x, off, lab, k) for x, lab in zip(x_all, labels, strict=True)]  # round 1: hard counts
    history = []
    for r in range(2, n_rounds + 1):
        t0 = time.perf_counter()
        total_nc = sum(s[0] for s in sites)
        total_ct = sum(s[1] for s in sites)
        # --- server: the split direction of every cluster, from the summed pairwise tables; silos put their
        # rows of the cluster into halves along it and send the halves' counts (a first message); the server
        # sums them
        plan = [None] * k
        half_of = [np.full(x.shape[0], -1, dtype=np.int64) for x in x_all]   # each silo's own, kept inside
        own_half = [{} for _ in x_all]
        total_half = {}
        if splits:
            pairs = sum(server.pair_tables(x, off, lab, k) for x, lab in zip(x_all, labels, strict=True))
            for c in range(k):
                if total_nc[c] >= 2 * min_size:
                    plan[c] = server.split_direction(pairs[c], off)
            mu = [np.divide(total_ct[c], total_nc[c]) if total_nc[c] > 0 else None for c in range(k)]
            for s, (x, lab) in enumerate(zip(x_all, labels, strict=True)):
                for c in range(k):
                    if plan[c] is None:
                        continue
                    rows = np.flatnonzero(lab == c)
                    score = np.zeros(rows.size)
                    for q in range(x.shape[1]):
                        xq = x[rows, q]
                        ok = xq >= 0
                        blk = slice(off[q], off[q + 1])
                        # centred one-hot of the observed cells along the direction
                        score[ok] += plan[c][off[q] + xq[ok]] - (mu[c][blk] * plan[c][blk]).sum()
                    half_of[s][rows] = (score < 0).astype(np.int64)
                    for h in (0, 1):
                        own_half[s][c, h] = counts(x[rows[half_of[s][rows] == h]], off,
                                                   np.zeros(int((half_of[s][rows] == h).sum()), dtype=np.int64),
                                                   1)
            for c in range(k):
                if plan[c] is not None:
                    for h in (0, 1):
                        total_half[c, h] = (sum(o[c, h][0] for o in own_half), sum(o[c, h][1] for o in own_half))
        # components: per cluster one (or two halves), then births
        comp_cluster, comp_half = [], []
        for c in range(k):
            for h in ((0, 1) if plan[c] is not None else (-1,)):
                comp_cluster.append(c)
                comp_half.append(h)
        n_anch = len(comp_cluster)
        n_comp = n_anch + n_births
        comp_cluster = np.array(comp_cluster)
        comp_half = np.array(comp_half)
        # --- silos
        new_sites, votes_all = [], []
        for s, (x, lab) in enumerate(zip(x_all, labels, strict=True)):
            prior = np.full((n_comp, fed.n_cols), fed.beta)
            z = np.empty(x.shape[0], dtype=np.int64)
            for j in range(n_anch):
                c, h = comp_cluster[j], comp_half[j]
                if h < 0:
                    prior[j] += total_ct[c] - sites[s][1][c]
                    z[lab == c] = j
                else:
                    prior[j] += np.clip(total_half[c, h][1][0] - own_half[s][c, h][1][0], 0.0, None)
                    z[(lab == c) & (half_of[s] == h)] = j
            alpha = np.full(n_comp, fed.alpha)
            nc, ct, votes = sweeps(x, off, prior, alpha, z, n_sweeps, n_burn, seed * 1_000_003 + r * 101 + s)
            new_sites.append((nc, ct))
            votes_all.append(votes)
        # --- server: births matched across silos, splits, merges (all from summed counts)
        # decisions use the counts of each silo's modal labels (hard counts: the collapsed p(X, z) of a
        # partition; expected counts blur two halves whose rows the sampler moves between sweeps)
        hard = [counts(x, off, v.argmax(axis=1), n_comp) for x, v in zip(x_all, votes_all, strict=True)]
        sum_nc = sum(a for a, _ in hard)[:n_anch]
        sum_ct = sum(b for _, b in hard)[:n_anch]
        new_id = np.empty(n_anch, dtype=np.int64)   # component -> new global cluster
        nxt, n_split = 0, 0
        for c in range(k):
            js = np.flatnonzero(comp_cluster == c)
            if js.size == 2:
                gain = server.merge_gain(sum_nc, sum_ct, js[0], js[1], off, fed.alpha, fed.beta,
                                         max(fed.n_components, k + 1))
                if gain < 0 and min(sum_nc[js]) >= min_size:
                    new_id[js] = [nxt, nxt + 1]
                    nxt += 2
                    n_split += 1
                    continue
            new_id[js] = nxt
            nxt += 1
        births = []                                  # (silo, component, nc, ct)
        for s, (nc, ct) in enumerate(hard):
            for j in range(n_anch, n_comp):
                if nc[j] >= min_size:
                    births.append((s, j, nc[j], ct[j]))
        birth_id = {}
        groups: list[list] = []
        for b in sorted(births, key=lambda b: -b[2]):
            best, where = 0.0, None
            for gi, g in enumerate(groups):
                gnc = np.array([g[0], b[2]])
                gct = np.stack([g[1], b[3]])
                gain = server.merge_gain(gnc, gct, 0, 1, off, fed.alpha, fed.beta, fed.n_components)
                if gain > best:
                    best, where = gain, gi
            if where is None:
                groups.append([b[2], b[3].copy(), [b]])
            else:
                groups[where][0] += b[2]
                groups[where][1] += b[3]
                groups[where][2].append(b)
        for gi, g in enumerate(groups):
            for b in g[2]:
                birth_id[b[0], b[1]] = nxt + gi
        k_new = nxt + len(groups)
        # new labels: each row's most frequent component; rows in births too small to keep fall back to the
        # anchored component they voted for most
        new_labels = []
        agg_nc = np.zeros(k_new)
        agg_ct = np.zeros((k_new, fed.n_cols))
        for s, votes in enumerate(votes_all):
            lut = np.full(n_comp, -1, dtype=np.int64)
            lut[:n_anch] = new_id
            for j in range(n_anch, n_comp):
                lut[j] = birth_id.get((s, j), -1)
            v = votes.copy()
            v[:, lut < 0] = -1
            new_labels.append(lut[v.argmax(axis=1)])
            nc, ct = hard[s]
            keep = lut >= 0
            np.add.at(agg_nc, lut[keep], nc[keep])
            np.add.at(agg_ct, lut[keep], ct[keep])
        # merges of global clusters the summed counts prefer as one
        merges = server.greedy_merges(agg_nc, agg_ct, off, fed.alpha, fed.beta,
                                      max(fed.n_components, k_new)) if ml_merges else []
        parent = np.arange(k_new)
        for a, b in merges:
            parent[parent == b] = a
        new_labels = [parent[lab] for lab in new_labels]
        # the new sites, under the merged ids
        sites_next = []
        for s in range(len(x_all)):
            lut = np.full(n_comp, -1, dtype=np.int64)
            lut[:n_anch] = new_id
            for j in range(n_anch, n_comp):
                lut[j] = birth_id.get((s, j), -1)
            keep = lut >= 0
            snc = np.zeros(k_new)
            sct = np.zeros((k_new, fed.n_cols))
            np.add.at(snc, parent[lut[keep]], new_sites[s][0][keep])
            np.add.at(sct, parent[lut[keep]], new_sites[s][1][keep])
            sites_next.append((snc, sct))
        # consecutive ids over the clusters in use (a cluster no row is labelled with is dropped)
        used = np.unique(np.concatenate(new_labels))
        lut = np.full(k_new, -1, dtype=np.int64)
        lut[used] = np.arange(used.size)
        new_labels = [lut[lab] for lab in new_labels]
        sites = [(snc[used], sct[used]) for snc, sct in sites_next]
        k_prev = k
        changed = _changed(labels, new_labels)
        n_emptied = k_new - len(merges) - int(used.size)
        labels, k = new_labels, int(used.size)
        sent = (f"up: per silo {n_comp} x {fed.n_cols + 1} expected counts (anchored part summable under "
                f"SecAgg; births per silo); down: {n_anch} x {fed.n_cols + 1} summed counts")
        if splits:
            sent += f"; up: {k_prev} x {fed.n_cols}^2 pairwise tables (summable)"
        history.append(Round(labels=labels, k=k, seconds=time.perf_counter() - t0, sweeps=n_sweeps,
                             changed=changed, born=len(groups), split=n_split, merged=len(merges) + n_emptied,
                             log_joint=pooled_log_joint(fed, labels), sent=sent))
    return history


# ----------------------------------------------------------- design 3: pooled-statistic Gibbs rounds
def blocked_gibbs_rounds(fed: Federation, labels: list[np.ndarray], *, checkpoints: list[int], seed: int,
                         window: int = 100) -> list[Round]:
    """Federated blocked Gibbs: each round the server draws weights and profiles from the prior plus the
    counts summed over silos, every silo draws its rows' allocations given them and sends its counts. One
    round is one sweep of the pooled Gibbs sampler (C+ components, the library's priors), so it is simulated
    as such. A row's label at a checkpoint is its most frequent component over the last ``window`` rounds."""
    sizes = [x.shape[0] for x in fed.codes]
    x = np.concatenate(fed.codes)
    z = np.concatenate(labels).astype(np.int64)
    c_n = max(fed.n_components, int(z.max()) + 1)
    prior = np.full((c_n, fed.n_cols), fed.beta)
    alpha = np.full(c_n, fed.alpha)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    history, done, prev = [], 0, [lab.copy() for lab in labels]
    for r in checkpoints:
        t0 = time.perf_counter()
        n_it = r - done
        w = min(window, n_it)
        _, _, votes = sweeps(x, fed.offsets, prior, alpha, z, n_it, n_it - w, seed * 1_000_003 + r)
        done = r
        lab = votes.argmax(axis=1)
        per = [lab[bounds[s]:bounds[s + 1]] for s in range(len(sizes))]
        history.append(Round(labels=per, k=int(np.unique(lab).size), seconds=time.perf_counter() - t0,
                             sweeps=n_it, changed=_changed(prev, per), log_joint=pooled_log_joint(fed, per),
                             sent=f"per round up: {c_n} x {fed.n_cols + 1} counts per silo (summable under "
                                  f"SecAgg); down: one draw of {c_n} weights and {c_n} x {fed.n_cols} profiles"))
        prev = per
    return history


def by_silo(labels: list[np.ndarray]) -> list[np.ndarray]:
    """An over-complete start: every (silo, global cluster) pair its own cluster, so that the rounds merge
    what the pooled rows do not keep apart, as a pooled chain from its over-fitted start does."""
    k = int(max(lab.max() for lab in labels)) + 1
    return _relabel([lab.astype(np.int64) + k * s for s, lab in enumerate(labels)])[0]


# --------------------------------------------------- design 3b: deterministic (variational) rounds
def _onehot(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    out = np.zeros((x.shape[0], int(offsets[-1])))
    for q in range(x.shape[1]):
        ok = x[:, q] >= 0
        out[np.flatnonzero(ok), offsets[q] + x[ok, q]] = 1.0
    return out


def vb_rounds(fed: Federation, labels: list[np.ndarray], *, checkpoints: list[int]) -> list[Round]:
    """Federated mean-field VB: the server holds q(pi) = Dir(alpha + sum n_k), q(p_kq) = Dir(beta + sum of
    expected counts); each round it broadcasts E log pi and E log p, every silo computes its rows'
    responsibilities and sends its expected counts (summable under SecAgg). Started from the hard counts of
    ``labels``; a component whose expected size falls to nothing stays empty (VB's pruning under a sparse
    alpha). Deterministic: no seed. A row's label is its most responsible component."""
    from scipy.special import digamma

    onehots = [_onehot(x, fed.offsets) for x in fed.codes]
    k = int(max(lab.max() for lab in labels)) + 1
    nc = np.zeros(k)
    ct = np.zeros((k, fed.n_cols))
    for x, lab in zip(fed.codes, labels, strict=True):
        a, b = counts(x, fed.offsets, lab, k)
        nc += a
        ct += b
    history, done, prev = [], 0, [lab.copy() for lab in labels]
    blocks = [slice(fed.offsets[q], fed.offsets[q + 1]) for q in range(len(fed.n_modalities))]
    for r in checkpoints:
        t0 = time.perf_counter()
        n_rounds = r - done
        for _ in range(n_rounds):
            a_pi = fed.alpha + nc
            elog_pi = digamma(a_pi) - digamma(a_pi.sum())
            a_p = fed.beta + ct
            elog_p = digamma(a_p)
            for blk in blocks:
                elog_p[:, blk] -= digamma(a_p[:, blk].sum(axis=1, keepdims=True))
            nc = np.zeros(k)
            ct = np.zeros((k, fed.n_cols))
            per = []
            for oh in onehots:                      # inside each silo
                lr = oh @ elog_p.T + elog_pi
                lr -= lr.max(axis=1, keepdims=True)
                resp = np.exp(lr)
                resp /= resp.sum(axis=1, keepdims=True)
                nc += resp.sum(axis=0)
                ct += resp.T @ oh
                per.append(resp.argmax(axis=1))
        done = r
        history.append(Round(labels=per, k=int(np.unique(np.concatenate(per)).size),
                             seconds=time.perf_counter() - t0, sweeps=n_rounds, changed=_changed(prev, per),
                             log_joint=pooled_log_joint(fed, per),
                             sent=f"per round up: {k} x {fed.n_cols + 1} expected counts per silo (summable "
                                  f"under SecAgg); down: {k} x {fed.n_cols + 1} expectations"))
        prev = per
    return history
