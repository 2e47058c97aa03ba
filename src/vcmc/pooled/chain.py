"""The pooled chain: everything of the global-informed rounds that is a function of the pooled sums alone
(docs/design.md §16), run identically by every silo.

A round of the pooled model's blocked Gibbs sampler has two halves: each silo draws its rows' allocations
given the weights and profiles (``vcmc.rows.rounds``), and the weights and profiles are drawn given the counts
of the allocations summed over the silos. This module is the second half and its bookkeeping: the draw
(``vcmc.pooled.gibbs``) on a stream fixed by the round, its alignment to a reference, which rounds are kept
and which kept draws are stored, the trace of the chain (occupied components and collapsed log joint), the
rule that stops it, and the answer it keeps. Every step is a deterministic function of the run's seed and the
sequence of pooled sums, so each silo computes the same draws from the same sums and nobody else chooses
them: the server only relays (docs/federation.md, "The rounds").

Rounds are numbered from 1, the start (the silos' first allocation, no draw). ``advance`` takes the pooled
counts of round r and returns the draws of round r + 1, or None once the chain has stopped. The rounds are
kept in windows: with ``checkpoints`` R_0 < R_1 < ..., window 0 is the second half of the first R_0 rounds
and window j the rounds (R_{j-1}, R_j], the second half of all the rounds so far when the checkpoints double.
At a checkpoint the chain stops if its window settled (split R-hat of the collapsed log joint over the
window's halves below ``max_rhat``, the halves' most frequent K equal, and, with two chains, their log joints
mixed and their K equal) or if it is the last checkpoint (the cap); otherwise the next window starts afresh.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import weakref

import numpy as np

from vcmc.pooled.gibbs import align_to, draw_gaussian, draw_parameters, log_joint

ROUNDS_KEY = 3            # the rounds' streams under the run's root seed (the layout: vcmc.pipeline)
PARAMETERS_KEY = 1_000_000_000   # the draws' streams beside the silos' (a silo's index is below 10,000)
MAX_RHAT = 1.1            # the rounds' settling target: split R-hat of the log joint over a window of 125 to
                          # 500 rounds, whose extra components blink on and off (Brooks and Gelman's 1.1)
MIN_WINDOW = 20           # a window of fewer kept rounds cannot be judged settled
_MEMO_SIZE = 16           # rounds' draws remembered per process (silos sharing a process ask for the same one)
_DRAWS: dict = {}
_LOG_JOINTS: dict = {}
_SHARED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # shared_chain's chains of this process


@dataclasses.dataclass(frozen=True)
class ChainPlan:
    """How the pooled chain runs; the same in every silo (the round start carries it).

    Attributes
    ----------
    n_components : int
        C, the components of the pooled model.
    alpha : float
        Dirichlet concentration of the weights.
    beta_cols : tuple of float
        Dirichlet concentration of every profile column (P).
    n_modalities : tuple of int
    checkpoints : tuple of int
        Rounds at which the chain may stop, increasing; the last is the most rounds it makes.
    stop : bool
        Stop at the first checkpoint whose window settled (False: run to the last checkpoint).
    n_chains : int
        Independent chains run side by side (the silos hold one allocation per chain); with two the rule also
        asks that they agree, and the answer is the chain of higher posterior.
    anneal : float
        Inverse temperature of the rows' draws in rounds ``2 .. anneal_until`` (1: plain Gibbs); of the last chain
        only (with two chains the first is plain).
    anneal_until : int
    max_stored : int
        Most kept draws stored per window (evenly spaced): the answer's draws and the rounds at which each silo
        adds its rows' allocation probabilities to their memberships.
    min_size : int
        The answer's clusters are the components with at least this many rows on average over the window.
    max_rhat : float
        The stopping rule's target for the split R-hat of the log joint (``settled``).
    n_gaussian : int
        G, the Gaussian items (docs/design.md §17.8): each chain's pooled sums then carry per component and item
        the observed rows, sum and sum of squares, and its draws the means and variances.
    gaussian_prior : tuple of float
        Their normal-inverse-gamma prior ``(m0, kappa0, a0, b0)`` (the pooled model's, unfractionated).
    """

    n_components: int
    alpha: float
    beta_cols: tuple[float, ...]
    n_modalities: tuple[int, ...]
    checkpoints: tuple[int, ...]
    stop: bool = True
    n_chains: int = 1
    anneal: float = 1.0
    anneal_until: int = 1
    max_stored: int = 500
    min_size: int = 1
    max_rhat: float = MAX_RHAT
    n_gaussian: int = 0
    gaussian_prior: tuple[float, ...] = ()

    def __post_init__(self):
        cps = tuple(int(r) for r in self.checkpoints)
        if not cps or cps[0] < 2 or any(b <= a for a, b in zip(cps, cps[1:], strict=False)):
            raise ValueError(f"checkpoints must be increasing rounds >= 2; got {cps}")
        if self.n_chains not in (1, 2) or self.max_stored < 1 or self.n_components < 1:
            raise ValueError("n_chains must be 1 or 2, max_stored and n_components >= 1")
        object.__setattr__(self, "checkpoints", cps)
        if self.n_gaussian and len(self.gaussian_prior) != 4:
            raise ValueError("Gaussian items need their prior (m0, kappa0, a0, b0)")
        object.__setattr__(self, "gaussian_prior", tuple(float(v) for v in self.gaussian_prior))

    @property
    def max_rounds(self) -> int:
        return self.checkpoints[-1]

    def window(self, j: int) -> tuple[int, int]:
        """Window j's rounds: ``(first, last]``."""
        last = self.checkpoints[j]
        return (1 + (last - 1) // 2 if j == 0 else self.checkpoints[j - 1]), last

    def stored_rounds(self, j: int) -> frozenset[int]:
        """The kept rounds of window j whose draws are stored: at most ``max_stored``, evenly spaced, the first
        and the last included."""
        return _stored_rounds(*self.window(j), self.max_stored)

    def beta(self) -> np.ndarray:
        return np.asarray(self.beta_cols, dtype=np.float64)

    @property
    def width(self) -> int:
        """Columns of a component in the alignment's reference: its profile (P) and its Gaussian means (G)."""
        return int(np.sum(self.n_modalities)) + int(self.n_gaussian)


@functools.lru_cache(maxsize=64)
def _stored_rounds(first: int, last: int, max_stored: int) -> frozenset[int]:
    # asked every round: computed once per window
    n_keep = last - first
    idx = np.unique(np.linspace(0, n_keep - 1, min(n_keep, max_stored)).round().astype(int))
    return frozenset(int(first + 1 + i) for i in idx)


def doubling(first: int, cap: int) -> tuple[int, ...]:
    """Checkpoints ``first, 2 first, 4 first, ...`` up to ``cap`` (which is the last whatever it is)."""
    out, r = [], int(first)
    while r < cap:
        out.append(r)
        r *= 2
    return (*out, int(cap))


@dataclasses.dataclass(frozen=True)
class Seeds:
    """The streams of the rounds: ``SeedSequence(entropy, spawn_key=(*prefix, ROUNDS_KEY, round, ...))``. The
    analyst's own session takes them from the run's seed; a deployment from the silos' group secret, which
    the server does not know (``vcmc.silo.secure_sum``)."""

    entropy: int
    prefix: tuple[int, ...] = ()

    def sequence(self, *key: int) -> np.random.SeedSequence:
        return np.random.SeedSequence(int(self.entropy), spawn_key=(*self.prefix, ROUNDS_KEY, *map(int, key)))

    def parameters(self, round_number: int, chain: int) -> np.random.Generator:
        return np.random.default_rng(self.sequence(round_number, PARAMETERS_KEY, chain))

    def sweep(self, round_number: int, silo: int, chain: int) -> np.random.Generator:
        return np.random.default_rng(self.sequence(round_number, silo, chain))


@dataclasses.dataclass
class Draw:
    """One chain's draw of a round: what the silos sweep at."""

    log_pi: np.ndarray
    log_profiles: np.ndarray
    store: bool
    inverse_temperature: float
    gaussian: np.ndarray | None = None     # (C, 2G) the Gaussian items' means then variances (standardised)


def _copied(draw: Draw) -> Draw:
    return dataclasses.replace(draw, log_pi=draw.log_pi.copy(), log_profiles=draw.log_profiles.copy(),
                               gaussian=None if draw.gaussian is None else draw.gaussian.copy())


def _digest(*arrays) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    for a in arrays:
        if a is not None:
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.digest()


def shared_chain(plan: ChainPlan, seeds: Seeds, run: tuple) -> PooledChain:
    """A fresh pooled chain for a silo that starts the rounds of ``run`` (the run's context digest and its
    participants), the same object for every silo of this process that starts them: the silos compute one chain
    from the same pooled counts (docs/design.md §16), so silos sharing a process (the analyst's own session, a
    process pool's worker) advance it once per round instead of once each (``PooledChain.advance``). A
    deployment's silo has a process of its own. Only a chain not yet advanced is shared, so a later run with the
    same key starts a chain of its own."""
    key = (plan, seeds, tuple(run))
    chain = _SHARED.get(key)
    if chain is None or not chain.fresh:
        chain = PooledChain(plan, seeds)
        _SHARED[key] = chain
    return chain


def settled(log_joints: np.ndarray, ks: np.ndarray, max_rhat: float = MAX_RHAT) -> dict:
    """Did a window settle? ``log_joints`` and ``ks`` are (chains, rounds): ArviZ's rank-normalised split R-hat
    of the collapsed log joint (each chain's two halves as chains), and the most frequent K (the chain's
    components holding the minimum cluster size) of every half equal. Returns ``stable``, ``rhat``, the halves'
    K and, when unstable, what to do (``said``)."""
    # arviz_stats's R-hat (which ArviZ re-exports): ArviZ itself would import its plotting half and matplotlib
    # into the ClientApp that answers a checkpoint's round (vcmc.mcmc.diagnostics does the same)
    import arviz_stats as az

    lj = np.atleast_2d(np.asarray(log_joints, dtype=np.float64))
    k = np.atleast_2d(np.asarray(ks, dtype=np.int64))
    half = lj.shape[1] // 2
    if half < MIN_WINDOW // 2:
        return {"stable": False, "rhat": None, "k_halves": [],
                "said": f"the rounds kept {lj.shape[1]} rounds, too few to judge whether they settled; raise "
                        "aggregation.rounds (--rounds)"}
    halves = np.concatenate([lj[:, :half], lj[:, half:2 * half]])
    rhat = float(az.rhat(halves)) if np.ptp(halves) > 0 else 1.0
    k_halves = [int(np.bincount(x).argmax()) for x in np.concatenate([k[:, :half], k[:, half:2 * half]])]
    stable = bool(rhat < max_rhat and len(set(k_halves)) == 1)
    said = "" if stable else (
        f"the rounds did not settle: over the kept rounds the components of the minimum cluster size were "
        f"{k_halves} (halves"
        f"{' of each chain' if lj.shape[0] > 1 else ''}) and the log joint's R-hat is {rhat:.3f} (target < "
        f"{max_rhat:g}); raise aggregation.rounds (--rounds) and compare")
    return {"stable": stable, "rhat": rhat, "k_halves": k_halves, "said": said}


class PooledChain:
    """The weights and profiles of the pooled chain(s), drawn from the pooled sums round after round.

    Parameters
    ----------
    plan : ChainPlan
    seeds : Seeds
    """

    def __init__(self, plan: ChainPlan, seeds: Seeds):
        self.plan, self.seeds = plan, seeds
        c, p, m = plan.n_components, plan.width, plan.n_chains
        self.round = 1                      # the last round whose counts were received (after advance)
        self.window = 0
        self.stopped = False
        self.reason = ""
        self.reference: list[np.ndarray | None] = [None] * m
        self.kept_sum = np.zeros((m, c, p))
        self.n_kept = np.zeros(m, dtype=np.int64)
        self.size_sum = np.zeros((m, c))
        self.n_sized = 0
        self.stored_pi: list[list[np.ndarray]] = [[] for _ in range(m)]
        self.stored_prof: list[list[np.ndarray]] = [[] for _ in range(m)]
        self.origin = np.tile(np.arange(c), (m, 1))     # the start component of each label (alignment permutes)
        self.trace_k: list[list[int]] = [[] for _ in range(m)]
        self.trace_kbig: list[list[int]] = [[] for _ in range(m)]     # components holding min_size rows or more
        self.history: list[dict] = []                                 # the stopping rule at every checkpoint
        self.trace_lj: list[list[float]] = [[] for _ in range(m)]
        self.stability: dict = {}
        # with Gaussian items: their stored draws, and the rows observing each (component, item) summed over the
        # window (the answer's release rule, vcmc.silo.endpoints.rounds)
        self.stored_gauss: list[list[np.ndarray]] = [[] for _ in range(m)]
        self.observed_sum = np.zeros((m, c, plan.n_gaussian))
        self._last: tuple | None = None     # (round, digest of its counts, the draws returned): advance's replay

    # -- the rounds -------------------------------------------------------------------------------------------

    def advance(self, counts: list[tuple[np.ndarray, np.ndarray]],
                round_number: int | None = None) -> list[Draw] | None:
        """Take the pooled counts (one ``(cluster (C,), modality (C, P))`` per chain, with Gaussian items
        ``(cluster, modality, gaussian (C, 3G))``) of round ``self.round`` (the start's on the first call); return
        each chain's draw of the next round, or None when the chain stops here (a settled window at a checkpoint,
        or the last checkpoint).

        ``round_number``, the round of the counts, lets silos that share the chain (``shared_chain``) each
        advance it: the first call of a round advances it, the others of the same round get the same draws
        (copies) once their counts are checked to be the same."""
        if round_number is None:
            return self._advance(counts)
        digest = _digest(*(part for table in counts for part in table))
        last = self._last
        if last is not None and int(round_number) == last[0]:
            if digest != last[1]:
                raise ValueError(f"round {int(round_number)}: the silos sharing this pooled chain received different "
                                 "pooled counts")
            return None if last[2] is None else [_copied(d) for d in last[2]]
        if int(round_number) != self.round:
            raise ValueError(f"the pooled chain expects the counts of round {self.round}, not {int(round_number)}")
        draws = self._advance(counts)
        self._last = (int(round_number), digest, None if draws is None else [_copied(d) for d in draws])
        return draws

    @property
    def fresh(self) -> bool:
        """Not advanced yet (``shared_chain`` shares only a fresh chain with a silo that starts)."""
        return self.round == 1 and self._last is None and not self.stopped

    def _advance(self, counts) -> list[Draw] | None:
        if self.stopped:
            raise ValueError("the pooled chain has stopped")
        plan, r = self.plan, self.round
        if len(counts) != plan.n_chains:
            raise ValueError(f"the pooled chain expects counts of {plan.n_chains} chain(s); got {len(counts)}")
        first, last = plan.window(self.window)
        counts = [self._checked(t) for t in counts]
        for ch, (cluster, modality, gauss) in enumerate(counts):
            self.trace_k[ch].append(int(np.count_nonzero(cluster)))
            self.trace_kbig[ch].append(int(np.count_nonzero(np.asarray(cluster) >= plan.min_size)))
            self.trace_lj[ch].append(self._log_joint(cluster, modality, gauss))
            if first < r <= last:
                self.size_sum[ch] += np.asarray(cluster, dtype=np.float64)
                if gauss is not None:
                    self.observed_sum[ch] += gauss[:, :plan.n_gaussian]
        if first < r <= last:
            self.n_sized += 1
        if r == last:
            lj = np.asarray([t[first:last] for t in self.trace_lj])       # rounds first+1 .. last (0-based)
            # K of the rule: the components that hold the minimum cluster size, as the answer's clusters do
            # (the occupied count also blinks with the single rows an emptied component catches)
            ks = np.asarray([t[first:last] for t in self.trace_kbig])
            self.stability = settled(lj, ks, plan.max_rhat)
            if plan.n_chains > 1:
                self.stability["chains_agree"] = self._chains_agree(lj, ks, plan.max_rhat)
                self.stability["stable"] = self.stability["stable"] and self.stability["chains_agree"]
            self.history.append({"round": int(r), **{k: v for k, v in self.stability.items() if k != "said"}})
            if (plan.stop and self.stability["stable"]) or self.window == len(plan.checkpoints) - 1:
                self.stopped = True
                self.reason = "settled" if self.stability["stable"] else "cap"
                return None
            self._new_window()
        r_next = r + 1
        first, last = plan.window(self.window)
        keep = first < r_next <= last
        store = keep and r_next in plan.stored_rounds(self.window)
        annealed = float(plan.anneal) if r_next <= plan.anneal_until else 1.0
        draws = []
        for ch, (cluster, modality, gauss) in enumerate(counts):
            log_pi, log_prof, gaussian, perm = self._aligned_draw(r_next, ch, cluster, modality, gauss)
            if perm is not None:
                self.origin[ch] = self.origin[ch][perm]
            prof = np.exp(log_prof)
            if gaussian is not None:     # the alignment's reference holds the Gaussian means beside the profiles
                prof = np.concatenate([prof, gaussian[:, :plan.n_gaussian]], axis=1)
            if keep:
                # the reference of the next alignment: the mean of the kept draws (this draw during burn-in)
                self.kept_sum[ch] += prof
                self.n_kept[ch] += 1
                self.reference[ch] = self.kept_sum[ch] / self.n_kept[ch]
                if store:
                    self.stored_pi[ch].append(log_pi)
                    self.stored_prof[ch].append(log_prof)
                    if gaussian is not None:
                        self.stored_gauss[ch].append(gaussian)
            else:
                self.reference[ch] = prof
            # with two chains only the second is annealed: a tempered and a plain burn-in, whose agreement says
            # more than two alike, and the answer the one of higher posterior (docs/design.md §16)
            draws.append(Draw(log_pi, log_prof, store, annealed if ch == plan.n_chains - 1 else 1.0, gaussian))
        self.round = r_next
        return draws

    def _checked(self, table) -> tuple:
        """``(cluster, modality, gaussian or None)`` of one chain's pooled counts, the Gaussian part required
        exactly when the plan has Gaussian items."""
        cluster, modality, *rest = table
        gauss = np.asarray(rest[0], dtype=np.float64) if rest and rest[0] is not None else None
        g = self.plan.n_gaussian
        if (gauss is None) != (g == 0) or (gauss is not None and gauss.shape != (self.plan.n_components, 3 * g)):
            raise ValueError(f"the pooled chain expects the statistics of {g} Gaussian item(s) per component")
        return cluster, modality, gauss

    def _aligned_draw(self, r_next: int, ch: int, cluster, modality, gauss=None):
        """Chain ``ch``'s draw of round ``r_next`` from the counts, aligned to its reference: ``(log pi, log
        theta, gaussian (C, 2G) or None, perm)`` (perm None before the first alignment). The Gaussian items'
        means and variances are drawn after the weights and profiles, on the same stream. A deterministic
        function of the plan, the seeds, the round, the counts and the reference, so silos sharing a process (the
        analyst's own session) compute it once: the memo is keyed by all of them and returns copies."""
        plan, ref = self.plan, self.reference[ch]
        h = hashlib.blake2b(digest_size=20)
        for part in (np.ascontiguousarray(cluster, dtype=np.float64), np.ascontiguousarray(modality, dtype=np.float64),
                     np.zeros(0) if ref is None else np.ascontiguousarray(ref, dtype=np.float64),
                     np.zeros(0) if gauss is None else np.ascontiguousarray(gauss, dtype=np.float64)):
            h.update(part.tobytes())
        key = (plan, self.seeds, int(r_next), int(ch), h.digest())
        hit = _DRAWS.get(key)
        if hit is None:
            rng = self.seeds.parameters(r_next, ch)
            log_pi, log_prof = draw_parameters(cluster, modality, alpha=plan.alpha, beta_cols=plan.beta(),
                                               n_modalities=plan.n_modalities, rng=rng)
            gaussian = None if gauss is None else draw_gaussian(gauss, np.asarray(plan.gaussian_prior),
                                                                plan.n_gaussian, rng)
            perm = None
            if ref is not None:
                perm = align_to(log_prof, ref, None if gaussian is None else gaussian[:, :plan.n_gaussian])
                log_pi, log_prof = log_pi[perm], log_prof[perm]
                gaussian = None if gaussian is None else gaussian[perm]
            hit = (log_pi, log_prof, gaussian, perm)
            if len(_DRAWS) >= _MEMO_SIZE:
                _DRAWS.pop(next(iter(_DRAWS)))
            _DRAWS[key] = hit
        return tuple(None if a is None else a.copy() for a in hit)

    def _log_joint(self, cluster, modality, gauss=None) -> float:
        plan = self.plan
        h = hashlib.blake2b(np.ascontiguousarray(cluster, dtype=np.float64).tobytes(), digest_size=20)
        h.update(np.ascontiguousarray(modality, dtype=np.float64).tobytes())
        if gauss is not None:
            h.update(np.ascontiguousarray(gauss, dtype=np.float64).tobytes())
        key = (plan, h.digest())
        value = _LOG_JOINTS.get(key)
        if value is None:
            value = log_joint(cluster, modality, alpha=plan.alpha, beta_cols=plan.beta(),
                              n_modalities=plan.n_modalities, gaussian=gauss,
                              gaussian_prior=np.asarray(plan.gaussian_prior) if gauss is not None else None)
            if len(_LOG_JOINTS) >= _MEMO_SIZE:
                _LOG_JOINTS.pop(next(iter(_LOG_JOINTS)))
            _LOG_JOINTS[key] = value
        return value

    def _new_window(self) -> None:
        self.window += 1
        self.kept_sum[:] = 0.0
        self.n_kept[:] = 0
        self.size_sum[:] = 0.0
        self.n_sized = 0
        self.stored_pi = [[] for _ in range(self.plan.n_chains)]
        self.stored_prof = [[] for _ in range(self.plan.n_chains)]
        self.stored_gauss = [[] for _ in range(self.plan.n_chains)]
        self.observed_sum[:] = 0.0

    @staticmethod
    def _chains_agree(lj: np.ndarray, ks: np.ndarray, max_rhat: float = MAX_RHAT) -> bool:
        """Two chains agree when their log joints over the window mix (R-hat below the target) and their most
        frequent K is the same."""
        import arviz_stats as az

        rhat = float(az.rhat(lj)) if np.ptp(lj) > 0 else 1.0
        return bool(rhat < max_rhat and len({int(np.bincount(k).argmax()) for k in ks}) == 1)

    # -- the answer ---------------------------------------------------------------------------------------

    def chosen(self) -> int:
        """The chain of the answer: of two, the one whose window has the higher mean collapsed log joint."""
        first, last = self.plan.window(self.window)
        means = [float(np.mean(t[first:last])) for t in self.trace_lj]
        return int(np.argmax(means))

    def clusters(self) -> np.ndarray:
        """The answer's clusters: the chosen chain's components with at least ``min_size`` rows on average over
        the window, largest first (the largest alone if none has)."""
        mean_size = self.size_sum[self.chosen()] / max(self.n_sized, 1)
        keep = np.flatnonzero(mean_size >= self.plan.min_size)
        if keep.size == 0:
            keep = np.asarray([int(np.argmax(mean_size))])
        return keep[np.argsort(-mean_size[keep], kind="stable")].astype(np.int64)

    def draws(self) -> tuple[np.ndarray, np.ndarray]:
        """The chosen chain's stored draws of the answer's clusters: weights renormalised (T, K) and profiles
        (T, K, P)."""
        ch, keep = self.chosen(), self.clusters()
        pi = np.exp(np.asarray(self.stored_pi[ch]))[:, keep]
        return pi / pi.sum(axis=1, keepdims=True), np.exp(np.asarray(self.stored_prof[ch]))[:, keep, :]

    def gaussian_draws(self) -> np.ndarray | None:
        """The chosen chain's stored draws of the answer's clusters' Gaussian means and variances (T, K, 2G), or
        None without Gaussian items."""
        if not self.plan.n_gaussian:
            return None
        return np.asarray(self.stored_gauss[self.chosen()])[:, self.clusters(), :]

    def observed_rows(self) -> np.ndarray | None:
        """(K, G) the rows observing each Gaussian item in each of the answer's clusters, on average over the
        window (the chosen chain), or None without Gaussian items."""
        if not self.plan.n_gaussian:
            return None
        return self.observed_sum[self.chosen()][self.clusters()] / max(self.n_sized, 1)

    # -- state (a deployment's silo keeps it between messages) -------------------------------------------------

    ARRAYS = ("kept_sum", "n_kept", "size_sum", "origin")

    def export(self) -> dict[str, np.ndarray]:
        m, c, p = self.plan.n_chains, self.plan.n_components, int(np.sum(self.plan.n_modalities))
        w = self.plan.width
        out = {f"chain.{name}": np.asarray(getattr(self, name)) for name in self.ARRAYS}
        out["chain.meta"] = np.asarray([self.round, self.window, int(self.stopped), self.n_sized], dtype=np.int64)
        out["chain.reference"] = np.asarray([np.full((c, w), np.nan) if ref is None else ref
                                             for ref in self.reference])
        out["chain.stored_pi"] = np.asarray([np.asarray(s).reshape(-1, c) for s in self.stored_pi])
        out["chain.stored_prof"] = np.asarray([np.asarray(s).reshape(-1, c, p) for s in self.stored_prof])
        out["chain.trace_k"] = np.asarray(self.trace_k, dtype=np.int64).reshape(m, -1)
        out["chain.trace_kbig"] = np.asarray(self.trace_kbig, dtype=np.int64).reshape(m, -1)
        out["chain.history"] = np.asarray([json.dumps(self.history)])
        out["chain.trace_lj"] = np.asarray(self.trace_lj, dtype=np.float64).reshape(m, -1)
        out["chain.reason"] = np.asarray([self.reason])
        if self.plan.n_gaussian:
            g2 = 2 * self.plan.n_gaussian
            out["chain.stored_gauss"] = np.asarray([np.asarray(s).reshape(-1, c, g2) for s in self.stored_gauss])
            out["chain.observed_sum"] = np.asarray(self.observed_sum)
        return out

    @classmethod
    def restore(cls, plan: ChainPlan, seeds: Seeds, state) -> PooledChain:
        chain = cls(plan, seeds)
        for name in cls.ARRAYS:
            setattr(chain, name, np.asarray(state[f"chain.{name}"]).copy())
        chain.round, chain.window, stopped, chain.n_sized = (int(v) for v in np.asarray(state["chain.meta"]))
        chain.stopped = bool(stopped)
        chain.reference = [None if np.isnan(ref).all() else np.asarray(ref)
                           for ref in np.asarray(state["chain.reference"])]
        chain.stored_pi = [list(np.asarray(s)) for s in np.asarray(state["chain.stored_pi"])]
        chain.stored_prof = [list(np.asarray(s)) for s in np.asarray(state["chain.stored_prof"])]
        chain.trace_k = [list(map(int, t)) for t in np.asarray(state["chain.trace_k"])]
        chain.trace_kbig = [list(map(int, t)) for t in np.asarray(state["chain.trace_kbig"])]
        chain.history = json.loads(str(np.asarray(state["chain.history"]).ravel()[0]))
        chain.trace_lj = [list(map(float, t)) for t in np.asarray(state["chain.trace_lj"])]
        chain.reason = str(np.asarray(state["chain.reason"]).ravel()[0])
        if plan.n_gaussian:
            chain.stored_gauss = [list(np.asarray(s)) for s in np.asarray(state["chain.stored_gauss"])]
            chain.observed_sum = np.asarray(state["chain.observed_sum"], dtype=np.float64).copy()
        return chain


def choose_births(pooled: np.ndarray, budget: int, min_size: int) -> list[int]:
    """The births of the start (docs/design.md §16, "Births"): the profile columns that are the least probable
    value of at least ``min_size`` of the silos' worst-explained rows (``pooled``, their count per column summed
    over the silos), most first, at most ``budget``."""
    counts = np.asarray(pooled, dtype=np.float64)
    order = np.argsort(-counts, kind="stable")
    return [int(j) for j in order[:max(int(budget), 0)] if counts[j] >= min_size]


MINIMA = 1024   # the largest minimum cluster size the silos' common minimum is agreed over (``minimum_vector``)


def minimum_vector(min_size: int) -> np.ndarray:
    """A silo's minimum cluster size as a one-hot vector (MINIMA,): summed over the participants (masked as any
    round's vector), it gives every silo the same common minimum, the largest (``common_minimum``), so that every
    silo's chain keeps the same clusters and stops at the same round whatever each operator set (docs/design.md
    §16, "One model in both modes")."""
    m = int(min_size)
    if not 1 <= m <= MINIMA:
        raise ValueError(f"the rounds agree a minimum cluster size of at most {MINIMA}; this silo's is {m}")
    out = np.zeros(MINIMA)
    out[m - 1] = 1.0
    return out


def common_minimum(pooled: np.ndarray) -> int:
    """The largest minimum cluster size among the participants, from the sum of their ``minimum_vector``."""
    held = np.flatnonzero(np.asarray(pooled) > 0)
    if held.size == 0:
        raise ValueError("no participant's minimum cluster size in the pooled vector")
    return int(held.max()) + 1


GAUSSIAN_ROW_WORTH = 1.42
"""A row's worth of one Gaussian item's log density on the standardised scale: ``|log N(y | mu, 1)|`` of a value one
standard deviation from its mean, ``0.92 + 0.5`` (as the assessment's grids, ``vcmc.silo.endpoints.assess``)."""


def log_joint_grid(n_modalities, min_size: int, n_gaussian: int = 0) -> float:
    """The grid (nats) a deployment's released log joints are rounded to: ``min_size`` rows' worth of log
    density, a row's worth taken as ``sum_q log K_q`` (its ``-log p(x)`` under uniform profiles, above a typical
    row's under the fitted ones) plus ``GAUSSIAN_ROW_WORTH`` per Gaussian item, so a difference of two released
    values does not resolve a few rows."""
    row = sum(math.log(int(k)) for k in n_modalities)
    if n_gaussian:
        row += GAUSSIAN_ROW_WORTH * int(n_gaussian)
    return float(max(int(min_size), 1) * row)
