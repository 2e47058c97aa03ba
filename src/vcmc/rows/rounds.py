"""The silo's half of the global-informed rounds (docs/design.md §16): its rows' allocations, drawn given the
pooled chain's weights and profiles, kept in the silo; only their counts leave it (masked, ``vcmc.silo``).

The state of the rounds (each row's current component in every chain, and its allocation probabilities summed
over the stored rounds of the current window) is row-level and lives in ``LocalSilo.rounds``; it is saved with
the silo's state between Flower messages and never sent. Rows with the same values (the same pattern, missing
cells included) have the same allocation probabilities under a draw, so the probabilities are computed once per
pattern, on the sampler's sparse layout (``vcmc.mcmc.sampler.layout.sparse_layout``: a row costs its exceptions
to the silo's most frequent codes, not its number of variables). The pooled chain itself (the draws, the
windows, the stopping rule) is ``vcmc.pooled.chain``, which every silo runs on the pooled sums.

The sweep is ``vcmc.mcmc.sampler.round_kernels`` (numba, imported when a round is answered).

With Gaussian items (docs/design.md §17.8) the rows are swept one by one with every item's density (no two rows
share a pattern once they hold a measurement), their memberships are summed per row, and the counts of an
allocation add per component and item the observed rows, sum and sum of squares of the values on the rounds'
fixed-point grid (``vcmc.family.gaussian.GRID_BITS``); the silo sweeps at the grid's values too, so the rounds are
the pooled model's sampler of those values exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from vcmc.exceptions import ConfigError, NotFittedError
from vcmc.model import profile_offsets

if TYPE_CHECKING:   # the layout module compiles numba kernels: imported when a round is answered, not on restore
    from vcmc.mcmc.sampler.layout import SparseLayout


@dataclass
class RoundState:
    """Row-level state of the rounds inside one silo (never sent)."""

    layout: SparseLayout      # the rows' patterns (vcmc.mcmc.sampler.layout)
    z: np.ndarray             # (chains, n) current component of each row in each chain
    n_components: int
    summed: np.ndarray        # (chains, U, C) allocation probabilities summed over the window's stored rounds
    summed_sq: np.ndarray     # (chains, U, C) their squares (the Monte Carlo error of the memberships)
    n_kept: int = 0           # stored rounds summed in the current window
    window: int = 0           # the pooled chain's window the sums belong to
    silo_weight_prior: float = 0.0   # > 0: memberships under the silo's own weights
    # (chains, stored rounds, C): the silo's allocation counts at each stored round of the window (with its own
    # weights only): its weights of that round, w = (a + n) / (C a + n_s), for the assessment (docs/design.md §16)
    stored_counts: np.ndarray | None = None
    per_row: bool = False     # Gaussian items: the memberships are summed per row (summed: (chains, n, C))
    _pattern_of_rows: np.ndarray | None = field(default=None, repr=False, compare=False)

    FIELDS = ("z", "summed", "summed_sq")
    LAYOUT_FIELDS = ("base_col", "ecol", "evar", "pat_start", "row_of", "pexc_start", "pexc")

    def export(self) -> dict[str, np.ndarray]:
        out = {f"rounds.{f}": np.asarray(getattr(self, f)) for f in self.FIELDS}
        out.update({f"rounds.layout.{f}": np.asarray(getattr(self.layout, f)) for f in self.LAYOUT_FIELDS})
        out["rounds.meta"] = np.asarray([self.n_components, self.n_kept, self.window, self.layout.n_row_exceptions],
                                        dtype=np.int64)
        out["rounds.silo_weight_prior"] = np.asarray([self.silo_weight_prior], dtype=np.float64)
        if self.stored_counts is not None:
            out["rounds.stored_counts"] = np.asarray(self.stored_counts)
        if self.per_row:
            out["rounds.per_row"] = np.asarray([1], dtype=np.int64)
        return out

    @classmethod
    def restore(cls, state) -> RoundState | None:
        if "rounds.meta" not in state:
            return None
        from vcmc.mcmc.sampler.layout import SparseLayout

        c, kept, window, n_exc = (int(v) for v in np.asarray(state["rounds.meta"]))
        layout = SparseLayout(**{f: np.asarray(state[f"rounds.layout.{f}"]) for f in cls.LAYOUT_FIELDS},
                              n_row_exceptions=n_exc)
        prior = float(np.asarray(state["rounds.silo_weight_prior"])[0])
        stored = np.asarray(state["rounds.stored_counts"]) if "rounds.stored_counts" in state else None
        return cls(layout=layout, **{f: np.asarray(state[f"rounds.{f}"]) for f in cls.FIELDS}, n_components=c,
                   n_kept=kept, window=window, silo_weight_prior=prior, stored_counts=stored,
                   per_row="rounds.per_row" in state)

    def kernel_layout(self) -> tuple[np.ndarray, ...]:
        """The layout's arrays in the kernels' argument order (``vcmc.mcmc.sampler.round_kernels``)."""
        lay = self.layout
        return lay.pat_start, lay.row_of, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col

    def pattern_of_rows(self) -> np.ndarray:
        """(n,) the pattern of every row (computed once: the layout never changes in a run); with Gaussian items
        every row is its own (the memberships are summed per row)."""
        if self._pattern_of_rows is None and self.per_row:
            self._pattern_of_rows = np.arange(self.z.shape[1], dtype=np.int64)
        if self._pattern_of_rows is None:
            lay = self.layout
            out = np.empty(self.z.shape[1], dtype=np.int64)
            out[lay.row_of] = np.repeat(np.arange(lay.n_patterns), np.diff(lay.pat_start))
            self._pattern_of_rows = out
        return self._pattern_of_rows

    def new_window(self, window: int) -> None:
        """The pooled chain started window ``window``: the memberships are summed afresh over its rounds."""
        if window != self.window:
            self.summed[:] = 0.0
            self.summed_sq[:] = 0.0
            self.n_kept = 0
            self.window = int(window)
            self.stored_counts = None

    def store_counts(self, chain: int, counts: np.ndarray) -> None:
        """Append chain ``chain``'s allocation counts of a stored round (every chain stores the same rounds)."""
        n_chains = self.z.shape[0]
        if self.stored_counts is None:
            self.stored_counts = np.zeros((n_chains, 0, self.n_components), dtype=np.int64)
        if chain == 0:
            self.stored_counts = np.concatenate(
                [self.stored_counts, np.zeros((n_chains, 1, self.n_components), dtype=np.int64)], axis=1)
        self.stored_counts[chain, -1] = counts

    def own_weights(self, chain: int) -> np.ndarray | None:
        """(stored rounds, C) the silo's own weights at each stored round of ``chain``, the posterior mean under
        a symmetric Dirichlet(a) given its allocation (the weights its memberships were made with), or None."""
        if self.silo_weight_prior <= 0 or self.stored_counts is None:
            return None
        a, n = self.silo_weight_prior, self.stored_counts[chain].astype(np.float64)
        return (a + n) / (self.n_components * a + self.z.shape[1])


def _misfits(silo, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The silo's worst-explained rows and their worst columns (``vcmc.rows.births``), under its own local
    clusters (the partition of its apply step and the mean of its own profile draws): nothing the server chose.
    The births are categorical (a profile column each): with Gaussian items the misfits are scored on the
    categorical items, the profile draws' first P columns."""
    from vcmc.rows.births import misfits

    local = silo.local
    if local is None:
        raise NotFittedError(f"silo {silo.name!r}: births need the silo's own clusters (a summarize request first)")
    profiles = local.profile_draws.mean(axis=0)[:, :silo.n_columns]
    return misfits(silo.codes, silo.n_modalities, local.partition, profiles, share)


def grid(silo) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The silo's Gaussian items on the rounds' fixed-point grid: ``(m (n, G) int64, observed (n, G), the grid's
    values (n, G) float64, NaN missing)``, or None without Gaussian items. Computed once per silo (its data never
    change in a run; kept in the silo, never sent, recomputed after a restore). Refuses a value beyond the grid's
    bound (``vcmc.family.gaussian.grid_values``)."""
    values = getattr(silo, "values", None)
    if values is None:
        return None
    cached = silo.__dict__.get("_round_grid")
    if cached is None:
        from vcmc.family.gaussian import GRID_BITS, grid_values

        names = [v.name for v in silo.data.schema.continuous]
        m, seen = grid_values(values, names)
        x = np.where(seen, m.astype(np.float64) * 2.0**-GRID_BITS, np.nan)
        cached = silo.__dict__["_round_grid"] = (m, seen, np.ascontiguousarray(x))
    return cached


def birth_vector(silo, share: float) -> np.ndarray:
    """How many of the silo's worst-explained rows have each profile column as their least probable value (P,)."""
    if share <= 0:
        return np.zeros(silo.n_columns)
    _, worst = _misfits(silo, float(share))
    return np.bincount(worst, minlength=silo.n_columns).astype(np.float64)


def start(silo, start_map, n_components: int, *, n_chains: int = 1, silo_weight_prior: float = 0.0,
          birth_share: float = 0.0, birth_columns=(), birth_components=()) -> list[tuple[np.ndarray, np.ndarray]]:
    """Allocations from the silo's own local partition (``start_map[local cluster]``) and its misfits in the
    birth components, the same in every chain; their counts (cluster (C,), modality (C, P)) per chain."""
    local = silo.local
    if local is None:
        raise NotFittedError(f"silo {silo.name!r}: the rounds start from the silo's own clusters; no summarize "
                             "request came first")
    c = int(n_components)
    start_map = np.asarray(start_map, dtype=np.int64).ravel()
    labels = np.asarray(local.partition, dtype=np.int64)
    if labels.size and (labels.max() >= start_map.size or start_map[: labels.max() + 1].min() < 0):
        raise ConfigError(f"round start: the start map names {start_map.size} clusters; this silo's partition "
                          f"needs {int(labels.max()) + 1}")
    if start_map.size and start_map.max() >= c:
        raise ConfigError(f"round start: the start map must send clusters to components in [0, {c})")
    z = start_map[labels]
    if len(birth_columns):
        rows, worst = _misfits(silo, float(birth_share))
        for col, comp in zip(np.asarray(birth_columns, dtype=np.int64), np.asarray(birth_components, dtype=np.int64),
                             strict=True):
            z[rows[worst == col]] = comp
    from vcmc.mcmc.sampler.layout import by_exception_count, sparse_layout

    offsets = profile_offsets(silo.n_modalities)
    # the sampler's order of the patterns (predictable loop trip counts); any order gives the same law
    layout = by_exception_count(sparse_layout(np.ascontiguousarray(silo.codes, dtype=np.int16), offsets))
    per_row = grid(silo) is not None
    u = z.size if per_row else layout.n_patterns
    silo.rounds = RoundState(layout=layout, z=np.tile(z, (int(n_chains), 1)), n_components=c,
                             summed=np.zeros((n_chains, u, c)), summed_sq=np.zeros((n_chains, u, c)),
                             silo_weight_prior=float(silo_weight_prior), per_row=per_row)
    return [allocation_counts(silo, ch) for ch in range(int(n_chains))]


def allocation_counts(silo, chain: int) -> tuple:
    """The counts (cluster (C,), modality (C, P)) of chain ``chain``'s current allocation; with Gaussian items
    also their statistics on the grid (C, 3G) int64."""
    from vcmc.mcmc.sampler.round_kernels import counts

    st = require(silo)
    out = counts(*st.kernel_layout(), st.z[chain], int(profile_offsets(silo.n_modalities)[-1]), st.n_components)
    return out if not st.per_row else (*out, _gaussian_counts(silo, st, chain))


def _gaussian_counts(silo, st: RoundState, chain: int) -> np.ndarray:
    from vcmc.mcmc.sampler.round_kernels import gaussian_counts

    m, seen, _ = grid(silo)
    return gaussian_counts(st.z[chain], m, seen, st.n_components)


def require(silo) -> RoundState:
    if getattr(silo, "rounds", None) is None:
        raise NotFittedError(f"silo {silo.name!r}: no rounds were started in this run")
    return silo.rounds


def sweep(silo, chain: int, log_pi, log_profiles, *, store: bool, rng: np.random.Generator,
          inverse_temperature: float = 1.0, gaussian=None) -> tuple:
    """One sweep of chain ``chain``'s allocations at the pooled chain's draw; the counts of the new allocation
    (cluster (C,), modality (C, P), with Gaussian items their statistics (C, 3G) on the grid). ``store``: add the
    rows' allocation probabilities to their memberships. ``gaussian`` (C, 2G): the draw's means and variances,
    required exactly when the silo has Gaussian items."""
    from vcmc.mcmc.sampler.round_kernels import accumulate_patterns, sweep_patterns

    st = require(silo)
    log_pi = np.ascontiguousarray(log_pi, dtype=np.float64)
    log_prof = np.ascontiguousarray(log_profiles, dtype=np.float64)
    inv_temp = float(inverse_temperature)
    if store and inv_temp != 1.0:
        raise ConfigError("round sweep: a stored round is drawn at inverse temperature 1")
    if st.per_row != (gaussian is not None):
        raise ConfigError("round sweep: the draw's Gaussian parameters are needed exactly when the silo has "
                          "continuous items")
    uniforms = rng.random(st.z.shape[1])
    own = bool(store) and st.silo_weight_prior > 0
    if st.per_row:
        return _sweep_mixed(silo, st, chain, log_pi, log_prof, np.ascontiguousarray(gaussian, dtype=np.float64),
                            uniforms, bool(store), own, inv_temp)
    z = st.z[chain]
    nc, ct = sweep_patterns(*st.kernel_layout(), log_pi, log_prof, uniforms, bool(store) and not own,
                            st.summed[chain], st.summed_sq[chain], z, inv_temp)
    st.z[chain] = z
    if own:
        # the silo's own weights given the allocation just drawn (its labels are this draw's): the posterior
        # mean under a symmetric Dirichlet(a), the memberships of a model whose weights differ by silo
        # (docs/design.md §16)
        a = st.silo_weight_prior
        n_sc = np.bincount(z, minlength=st.n_components).astype(np.float64)
        st.store_counts(chain, n_sc.astype(np.int64))
        lay = st.layout
        accumulate_patterns(lay.pat_start, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col,
                            np.log((a + n_sc) / (st.n_components * a + z.size)), log_prof, st.summed[chain],
                            st.summed_sq[chain])
    return nc, ct


def _sweep_mixed(silo, st: RoundState, chain: int, log_pi, log_prof, gaussian, uniforms, store: bool, own: bool,
                 inv_temp: float) -> tuple:
    """``sweep`` with Gaussian items: row by row with every item's density (``round_kernels.sweep_rows_mixed``)."""
    from vcmc.mcmc.sampler.round_kernels import accumulate_rows_mixed, sweep_rows_mixed

    _, _, x = grid(silo)
    codes = np.ascontiguousarray(silo.codes)
    offsets = np.ascontiguousarray(profile_offsets(silo.n_modalities), dtype=np.int64)
    z = st.z[chain]
    sweep_rows_mixed(codes, offsets, x, log_pi, log_prof, gaussian, uniforms, store and not own, st.summed[chain],
                     st.summed_sq[chain], z, inv_temp)
    st.z[chain] = z
    if own:
        # the silo's own weights given the allocation just drawn (as in ``sweep``)
        a = st.silo_weight_prior
        n_sc = np.bincount(z, minlength=st.n_components).astype(np.float64)
        st.store_counts(chain, n_sc.astype(np.int64))
        accumulate_rows_mixed(codes, offsets, x, np.log((a + n_sc) / (st.n_components * a + z.size)), log_prof,
                              gaussian, st.summed[chain], st.summed_sq[chain])
    return allocation_counts(silo, chain)


def finish(silo, chain: int, keep) -> dict[str, object]:
    """Memberships of the answer's clusters ``keep`` in chain ``chain`` (allocation probabilities averaged over
    the window's stored rounds, renormalised), labels, and their cluster-level sums (``membership_summary``);
    both stay in the silo (``silo.memberships``, ``silo.assignments``)."""
    from vcmc.rows.memberships import MonteCarlo, membership_summary

    st = require(silo)
    if st.n_kept < 1:
        raise NotFittedError(f"silo {silo.name!r}: the rounds stored no sweep; nothing to average")
    keep = np.asarray(keep, dtype=np.int64).ravel()
    if keep.size < 1 or keep.min() < 0 or keep.max() >= st.n_components or np.unique(keep).size != keep.size:
        raise ConfigError(f"round finish: keep must list distinct components in [0, {st.n_components})")
    mean = st.summed[chain][:, keep] / st.n_kept
    sd = np.sqrt(np.maximum(st.summed_sq[chain][:, keep] / st.n_kept - mean**2, 0.0))
    total = mean.sum(axis=1, keepdims=True)
    # a pattern whose probability lay on dropped components (emptied by the end) is spread evenly: it has
    # no evidence for any kept cluster
    pattern_m = np.where(total > 0, mean / np.where(total > 0, total, 1.0), 1.0 / keep.size)
    memberships = pattern_m[st.pattern_of_rows()]
    labels = np.argmax(memberships, axis=1).astype(np.int64)
    silo.memberships, silo.assignments = memberships, labels
    error = float(np.max(sd / np.where(total > 0, total, 1.0)) / np.sqrt(st.n_kept)) if sd.size else 0.0
    monte_carlo = MonteCarlo(n_draws=st.n_kept, n_available=st.n_kept, error=error, target=0.0)
    return membership_summary(memberships, labels, monte_carlo)
