"""The silo's half of the global-informed rounds (docs/design.md §16): its rows' allocations, drawn given the
server's weights and profiles, kept in the silo; only their counts leave it.

The state of the rounds (each row's current component and its allocation probabilities summed over the kept
rounds) is row-level and lives in ``LocalSilo.rounds``; it is saved with the silo's state between Flower
messages and never sent. Rows with the same values (the same pattern, missing cells included) have the same
allocation probabilities under a draw, so the probabilities are computed once per pattern, on the sampler's
sparse layout (``vcmc.mcmc.sampler.layout.sparse_layout``: a row costs its exceptions to the silo's most
frequent codes, not its number of variables).

The sweep itself is ``vcmc.mcmc.sampler.round_kernels`` (numba, imported when a round is answered). The silo's
rounds endpoint (``vcmc.silo.endpoints.rounds``) checks the requests and wraps what these functions return into
replies.
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
    z: np.ndarray             # (n,) current component of each row
    n_components: int
    summed: np.ndarray        # (U, C) allocation probabilities summed over the kept rounds
    summed_sq: np.ndarray     # (U, C) their squares (the Monte Carlo error of the memberships)
    n_kept: int = 0
    last_round: int = 0
    silo_weight_prior: float = 0.0   # > 0: memberships under the silo's own weights (RoundStartRequest)
    last_split: np.ndarray | None = None   # rows the last split proposal drew to b (in memory only, never sent)
    _pattern_of_rows: np.ndarray | None = field(default=None, repr=False, compare=False)

    FIELDS = ("z", "summed", "summed_sq")
    LAYOUT_FIELDS = ("base_col", "ecol", "evar", "pat_start", "row_of", "pexc_start", "pexc")

    def export(self) -> dict[str, np.ndarray]:
        out = {f"rounds.{f}": np.asarray(getattr(self, f)) for f in self.FIELDS}
        out.update({f"rounds.layout.{f}": np.asarray(getattr(self.layout, f)) for f in self.LAYOUT_FIELDS})
        out["rounds.meta"] = np.asarray([self.n_components, self.n_kept, self.last_round,
                                         self.layout.n_row_exceptions], dtype=np.int64)
        out["rounds.silo_weight_prior"] = np.asarray([self.silo_weight_prior], dtype=np.float64)
        return out

    @classmethod
    def restore(cls, state) -> RoundState | None:
        if "rounds.meta" not in state:
            return None
        from vcmc.mcmc.sampler.layout import SparseLayout

        c, kept, last, n_exc = (int(v) for v in np.asarray(state["rounds.meta"]))
        layout = SparseLayout(**{f: np.asarray(state[f"rounds.layout.{f}"]) for f in cls.LAYOUT_FIELDS},
                              n_row_exceptions=n_exc)
        key = "rounds.silo_weight_prior"      # absent from a state saved before version 2 of the start
        prior = float(np.asarray(state[key])[0]) if key in state else 0.0
        return cls(layout=layout, **{f: np.asarray(state[f"rounds.{f}"]) for f in cls.FIELDS}, n_components=c,
                   n_kept=kept, last_round=last, silo_weight_prior=prior)

    def kernel_layout(self) -> tuple[np.ndarray, ...]:
        """The layout's arrays in the kernels' argument order (``vcmc.mcmc.sampler.round_kernels``)."""
        lay = self.layout
        return lay.pat_start, lay.row_of, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col

    def pattern_of_rows(self) -> np.ndarray:
        """(n,) the pattern of every row (computed once: the layout never changes in a run)."""
        if self._pattern_of_rows is None:
            lay = self.layout
            out = np.empty(self.z.size, dtype=np.int64)
            out[lay.row_of] = np.repeat(np.arange(lay.n_patterns), np.diff(lay.pat_start))
            self._pattern_of_rows = out
        return self._pattern_of_rows


def _misfits(silo, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The silo's worst-explained rows and their worst columns (``vcmc.rows.births``), from its one-shot labels
    and the global profiles it labelled them with."""
    from vcmc.rows.births import misfits

    if silo.assignments is None or silo.label_profiles is None:
        raise NotFittedError(f"silo {silo.name!r}: births need the one-shot labels made with the global profile "
                             "draws (an assign request with draws came first)")
    return misfits(silo.codes, silo.n_modalities, silo.assignments, silo.label_profiles, share)


def birth(silo, share: float) -> np.ndarray:
    """How many of the silo's worst-explained rows have each profile column as their least probable value (P,)."""
    _, worst = _misfits(silo, float(share))
    return np.bincount(worst, minlength=silo.n_columns).astype(np.float64)


def start(silo, start_map, n_components: int, *, silo_weight_prior: float = 0.0, birth_share: float = 0.0,
          birth_columns=None, birth_components=None) -> tuple[np.ndarray, np.ndarray]:
    """Allocations from the silo's one-shot labels (``start_map[label]``), its misfits in the birth components,
    and their counts (cluster (C,), modality (C, P))."""
    if silo.assignments is None:
        raise NotFittedError(f"silo {silo.name!r}: the rounds start from the one-shot labels; no assign request "
                             "came first")
    c = int(n_components)
    labels = np.asarray(silo.assignments, dtype=np.int64)
    start_map = np.asarray(start_map, dtype=np.int64).ravel()
    if labels.size and labels.max() >= start_map.size:
        raise ConfigError(f"round start: start maps {start_map.size} clusters; this silo's labels need "
                          f"{int(labels.max()) + 1}")
    if start_map.size and (start_map.min() < 0 or start_map.max() >= c):
        raise ConfigError(f"round start: start must map clusters to components in [0, {c})")
    z = start_map[labels]
    if birth_columns is not None and np.asarray(birth_columns).size:
        # checked by the gate: distinct columns, components in range, a share in (0, MAX_BIRTH_SHARE]
        rows, worst = _misfits(silo, float(birth_share))
        for col, comp in zip(np.asarray(birth_columns, dtype=np.int64),
                             np.asarray(birth_components, dtype=np.int64), strict=True):
            z[rows[worst == col]] = comp
    from vcmc.mcmc.sampler.layout import by_exception_count, sparse_layout

    offsets = profile_offsets(silo.n_modalities)
    # the sampler's order of the patterns (predictable loop trip counts); any order gives the same law
    layout = by_exception_count(sparse_layout(np.ascontiguousarray(silo.codes, dtype=np.int16), offsets))
    u = layout.n_patterns
    silo.rounds = RoundState(layout=layout, z=z, n_components=c, summed=np.zeros((u, c)), summed_sq=np.zeros((u, c)),
                             silo_weight_prior=float(silo_weight_prior))   # checked by the gate
    from vcmc.mcmc.sampler.round_kernels import counts

    return counts(*silo.rounds.kernel_layout(), z, int(offsets[-1]), c)


def _require(silo) -> RoundState:
    if getattr(silo, "rounds", None) is None:
        raise NotFittedError(f"silo {silo.name!r}: no rounds were started in this run")
    return silo.rounds


def sweep(silo, round_number: int, log_pi, log_profiles, *, keep: bool, seed_entropy: int, spawn_key,
          inverse_temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """One sweep of the rows' allocations at the server's draw; the counts of the new allocation (cluster (C,),
    modality (C, P)). ``keep``: add the rows' allocation probabilities to their memberships."""
    from vcmc.mcmc.sampler.round_kernels import accumulate_patterns, sweep_patterns

    st = _require(silo)
    offsets = profile_offsets(silo.n_modalities)
    log_pi = np.ascontiguousarray(log_pi, dtype=np.float64)
    log_prof = np.ascontiguousarray(log_profiles, dtype=np.float64)
    if log_pi.shape != (st.n_components,) or log_prof.shape != (st.n_components, int(offsets[-1])):
        raise ConfigError(f"round sweep: log_pi must be ({st.n_components},) and log_profiles "
                          f"({st.n_components}, {int(offsets[-1])}); got {log_pi.shape} and {log_prof.shape}")
    rng = np.random.default_rng(np.random.SeedSequence(int(seed_entropy), spawn_key=tuple(int(k) for k in spawn_key)))
    inv_temp = float(inverse_temperature)
    if not (np.isfinite(inv_temp) and inv_temp > 0) or (keep and inv_temp != 1.0):
        raise ConfigError(f"round sweep: inverse_temperature must be a finite float > 0, and 1 in a kept round; "
                          f"got {inv_temp!r} (keep={bool(keep)})")
    uniforms = rng.random(st.z.size)
    own = bool(keep) and st.silo_weight_prior > 0
    nc, ct = sweep_patterns(*st.kernel_layout(), log_pi, log_prof, uniforms, bool(keep) and not own,
                            st.summed, st.summed_sq, st.z, inv_temp)
    if own:
        # the silo's own weights given the allocation just drawn (its labels are this draw's): the posterior
        # mean under a symmetric Dirichlet(a), the memberships of a model whose weights differ by silo
        # (docs/design.md §16)
        a = st.silo_weight_prior
        n_sc = np.bincount(st.z, minlength=st.n_components).astype(np.float64)
        lay = st.layout
        accumulate_patterns(lay.pat_start, lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col,
                            np.log((a + n_sc) / (st.n_components * a + st.z.size)), log_prof, st.summed,
                            st.summed_sq)
    if keep:
        st.n_kept += 1
    st.last_round = int(round_number)
    return nc, ct


def move(silo, kind: str, a: int, b: int, log_profile_a, log_profile_b, *, log_rho: float, log_1m_rho: float,
         seed_entropy: int, spawn_key) -> tuple[float, float, np.ndarray]:
    """The silo's part of a split-merge proposal between components a and b: the sum of the log proposal
    probabilities of its rows, and for a split the rows drawn to b and their observed cells per modality
    column (``log_q``, ``cluster_b``, ``modality_b``; the silo keeps nothing of it but the rows drawn)."""
    from vcmc.mcmc.sampler.round_kernels import pair_loglik
    from vcmc.model import one_hot_counts

    st = _require(silo)
    a, b = int(a), int(b)
    if a == b or min(a, b) < 0 or max(a, b) >= st.n_components:
        raise ConfigError(f"round move: a and b must be two different components in [0, {st.n_components})")
    p = int(profile_offsets(silo.n_modalities)[-1])
    log_a = np.ascontiguousarray(log_profile_a, dtype=np.float64)
    log_b = np.ascontiguousarray(log_profile_b, dtype=np.float64)
    if log_a.shape != (p,) or log_b.shape != (p,):
        raise ConfigError(f"round move: the profiles must have {p} log probabilities")
    lay = st.layout
    pattern = st.pattern_of_rows()

    def split_log_probabilities(rows):
        # only the rows of a (and of b for a merge) enter the proposal: no other row is computed
        ll = pair_loglik(pattern[rows], lay.pexc_start, lay.pexc, lay.ecol, lay.evar, lay.base_col, log_a, log_b)
        la = float(log_rho) + ll[:, 0]
        lb = float(log_1m_rho) + ll[:, 1]
        norm = np.logaddexp(la, lb)
        return la - norm, lb - norm

    if kind == "merge":
        log_q = float(split_log_probabilities(np.flatnonzero(st.z == a))[0].sum()
                      + split_log_probabilities(np.flatnonzero(st.z == b))[1].sum())
        return log_q, 0.0, np.zeros(p)
    rng = np.random.default_rng(np.random.SeedSequence(int(seed_entropy), spawn_key=tuple(int(k) for k in spawn_key)))
    rows = np.flatnonzero(st.z == a)
    log_pa, log_pb = split_log_probabilities(rows)
    to_b = rng.random(rows.size) < np.exp(log_pb)
    log_q = float(log_pb[to_b].sum() + log_pa[~to_b].sum())
    moved = rows[to_b]
    st.last_split = moved
    modality = one_hot_counts(silo.codes[moved], np.zeros(moved.size, dtype=np.int64), 1, silo.n_modalities)[0]
    return log_q, float(moved.size), np.asarray(modality, dtype=np.float64)


def finish(silo, keep) -> dict[str, object]:
    """Memberships of the kept components (averaged allocation probabilities, renormalised), labels, and
    their cluster-level sums (``membership_summary``); both stay in the silo (``silo.memberships``,
    ``silo.assignments``)."""
    from vcmc.rows.memberships import MonteCarlo, membership_summary

    st = _require(silo)
    if st.n_kept < 1:
        raise NotFittedError(f"silo {silo.name!r}: the rounds kept no sweep; nothing to average")
    keep = np.asarray(keep, dtype=np.int64).ravel()
    if keep.size < 1 or keep.min() < 0 or keep.max() >= st.n_components or np.unique(keep).size != keep.size:
        raise ConfigError(f"round finish: keep must list distinct components in [0, {st.n_components})")
    mean = st.summed[:, keep] / st.n_kept
    sd = np.sqrt(np.maximum(st.summed_sq[:, keep] / st.n_kept - mean**2, 0.0))
    total = mean.sum(axis=1, keepdims=True)
    # a pattern whose probability lay on dropped components (emptied by the end) is spread evenly: it has
    # no evidence for any kept cluster; the rounds' K check counts such rows (none in a stable chain)
    pattern_m = np.where(total > 0, mean / np.where(total > 0, total, 1.0), 1.0 / keep.size)
    memberships = pattern_m[st.pattern_of_rows()]
    labels = np.argmax(memberships, axis=1).astype(np.int64)
    silo.memberships, silo.assignments = memberships, labels
    silo.label_profiles = None          # the labels are the rounds' now, not the one-shot profiles'
    error = float(np.max(sd / np.where(total > 0, total, 1.0)) / np.sqrt(st.n_kept)) if sd.size else 0.0
    monte_carlo = MonteCarlo(n_draws=st.n_kept, n_available=st.n_kept, error=error, target=0.0)
    return membership_summary(memberships, labels, monte_carlo)
