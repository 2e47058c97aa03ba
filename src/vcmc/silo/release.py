"""The release rules every count and every scalar share, whatever the request: the minimum cluster size with
complementary withholding, DP noise, suppression and rounding of counts, and the grid of scalar sums over
rows (docs/federation.md, "Disclosure table"; docs/design.md §13). Each endpoint's release rule is made of
these; the limits in force are the gate's (``Gate.privacy``, ``Gate.min_size``).

No withheld part may come back from a sum the server knows. A reply's per-cluster vector sums to the silo's
row count (sent in its summary and in several replies); a table's (cluster, variable) block to the
cluster's size (sent) less its missing values; a table's column to the silo's count of that modality (sent
by the assessment). So withholding one entry of such a group would give it back as "the sum minus the rest":
``vcmc.disclosure.complementary_withholding`` withholds further entries until every group hides none, or at
least two adding up to at least the limit (what the server then learns is the sum of a group of at least
the limit, as of a merged cluster).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from vcmc.disclosure import (
    complementary_withholding,
    dp_noise,
    primary_max,
    protect_counts,
    round_counts,
    table_families,
)
from vcmc.model import profile_offsets

silo_log = logging.getLogger("vcmc.silo")


def small(values: np.ndarray, minimum: float) -> np.ndarray:
    """Entries describing fewer than ``minimum`` people but more than none: withheld (sent as 0)."""
    v = np.asarray(values, dtype=np.float64)
    return (v > 0) & (v < minimum)


def withhold(values: np.ndarray, minimum: int) -> np.ndarray:
    """``values`` with the entries under the minimum size (but above 0) set to 0, dtype kept."""
    v = np.asarray(values)
    return np.where(small(v, minimum), np.zeros((), dtype=v.dtype), v)


def round_real(values: np.ndarray, base: int) -> np.ndarray:
    """Real-valued counts (soft sums) to the nearest multiple of ``base``, halves up, as ``round_counts``."""
    v = np.asarray(values, dtype=np.float64)
    return v if base <= 1 else np.floor(v / base + 0.5) * base


def protect_vector(gate, counts: np.ndarray) -> np.ndarray:
    """Suppression (cells in [1, below) to 0) and rounding of a vector of whole-silo counts."""
    privacy = gate.privacy
    out = np.asarray(counts, dtype=np.int64).copy()
    if privacy.suppress_cells_below > 1:
        out[(out >= 1) & (out < privacy.suppress_cells_below)] = 0
    return round_counts(out, privacy.round_to)


def noised_vector(gate, counts: np.ndarray) -> np.ndarray:
    """A vector of counts with the DP noise in force (none without ``dp_epsilon``), floored at 0."""
    privacy = gate.privacy
    counts = np.asarray(counts, dtype=np.int64)
    if privacy.dp_epsilon is None:
        return counts
    plain = dataclasses.replace(privacy, suppress_cells_below=0, round_to=1)
    spent(gate)
    return np.maximum(protect_counts(counts[None], plain, gate.noise_rng(), secure=gate.silo.secure_noise)[0][0], 0)


def spent(gate, n_releases: int = 1, epsilon: float | None = None) -> None:
    """Record ``n_releases`` noised releases of the run's epsilon (each epsilon-DP on its own) in the gate's
    state and the silo's log; the server's accountant (``vcmc.federation.accounting``) counts the same
    releases from the replies it receives."""
    st = gate.state
    st.dp_releases += int(n_releases)
    eps = float(gate.privacy.dp_epsilon if epsilon is None else epsilon)
    silo_log.info(
        "silo %r: %d noised release(s) of epsilon %g in this run (basic composition %g; zCDP rho %g)",
        gate.silo.name, st.dp_releases, eps, st.dp_releases * eps, st.dp_releases * eps * eps / 2)


def cluster_limit(gate) -> float:
    """The limit of a count of people in a cluster: the minimum cluster size, or the suppression threshold
    where it is higher (a cluster count is a cell of the silo's cluster-by-nothing table)."""
    return float(max(gate.min_size, int(gate.privacy.suppress_cells_below)))


def withheld_entries(gate, values: np.ndarray, *, limit: float | None = None, also=()) -> np.ndarray:
    """Which entries of per-cluster vectors ``(..., C)`` are withheld: those under ``limit`` (default
    ``cluster_limit``) before or after rounding (a count that rounding takes under the limit is small too),
    likewise in any array of ``also`` (the expected sizes beside the counts), and the complements that keep
    each vector's sum (the silo's rows, which the server knows) from giving them back."""
    limit = cluster_limit(gate) if limit is None else float(limit)
    base = int(gate.privacy.round_to)
    values = np.asarray(values, dtype=np.float64)
    primary = np.zeros(values.shape, dtype=bool)
    for a in (values, *also):
        a = np.asarray(a, dtype=np.float64)
        primary |= small(a, limit) | ((a > 0) & (round_real(a, base) < limit))
    if not primary.any():
        return primary
    lead = np.arange(int(np.prod(values.shape[:-1]))).reshape(values.shape[:-1])
    family = np.broadcast_to(lead[..., None], values.shape)
    return complementary_withholding(values, primary, [family], limit, also=also,
                                     primary_max=primary_max(limit, base))



def protect_table(gate, cluster: np.ndarray, modality: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A count table (cluster sizes ``(..., C)`` and their modality counts ``(..., C, P)``) as it may leave the
    silo: DP noise (sizes and cells, one release per table), clusters under the minimum size withheld with
    their modality counts and with complements (``withheld_entries``), cells under the suppression threshold
    suppressed with complements in their (cluster, variable) block and their column, and rounding."""
    return protect_table_at(gate, cluster, modality, limit=cluster_limit(gate))


def protect_table_at(gate, cluster: np.ndarray, modality: np.ndarray, *, limit: float, noise: bool = True
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``protect_table`` with the limit of a cluster count ``limit`` (0: no cluster withheld) and, with
    ``noise=False``, no DP noise (the latent class analysis' EM sums, refused under DP in a deployment)."""
    privacy = gate.privacy
    cluster = np.maximum(np.asarray(cluster, dtype=np.float64), 0.0)
    modality = np.maximum(np.asarray(modality, dtype=np.float64), 0.0)
    if noise and privacy.dp_epsilon is not None:
        cluster, modality = _noised_table(gate, cluster, modality)
    withheld = withheld_entries(gate, cluster, limit=limit) if limit > 0 else np.zeros(cluster.shape, bool)
    below = int(privacy.suppress_cells_below)
    cells = np.broadcast_to(withheld[..., None], modality.shape).copy()
    if below > 1:
        cells |= small(modality, below)
    if below > 1 and cells.any():
        # the blocks of a withheld cluster have no known sum (its size is withheld); its cells stay in their
        # columns, where the withheld clusters together are one group of at least the limit (without
        # suppression that group's cells are a merged cluster's table, which the minimum size allows)
        families = table_families(modality.shape, gate.silo.n_modalities, rows=~withheld, columns=True)
        cells = complementary_withholding(modality, cells, families, float(below),
                                          primary_max=primary_max(below, privacy.round_to))
    cluster = np.where(withheld, 0.0, round_real(cluster, privacy.round_to))
    # a cluster sent as 0 sends no modality count (one that rounding took to 0 included)
    modality = np.where(cells | (cluster == 0)[..., None], 0.0, round_real(modality, privacy.round_to))
    return cluster, modality


def _noised_table(gate, cluster: np.ndarray, modality: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DP noise on each table ``(cluster, modality)`` of the leading axes: one person changes one cluster count
    and one cell per variable, so the L1 sensitivity is the number of variables + 1 and each table is one
    release of epsilon (soft sums are rounded to whole people first)."""
    privacy = gate.privacy
    n_var = len(gate.silo.n_modalities)
    flat = np.concatenate([cluster[..., None], modality], axis=-1)
    n_tables = int(np.prod(cluster.shape[:-1]))
    rng = gate.noise_rng()
    noisy = dp_noise(np.rint(flat), privacy.dp_epsilon, n_var + 1, rng=rng, secure=gate.silo.secure_noise)
    noisy = np.maximum(noisy, 0).astype(np.float64)
    spent(gate, n_tables)
    return noisy[..., 0], noisy[..., 1:]


def unprotected(gate) -> bool:
    """No suppression, rounding or noise in force."""
    privacy = gate.privacy
    return privacy.suppress_cells_below <= 1 and privacy.round_to <= 1 and privacy.dp_epsilon is None


# -- scalars computed from rows ---------------------------------------------------------------------------------

def scalars_exact(gate) -> bool:
    """Whether a scalar sum over rows leaves as computed: only where the policy says so
    (``SiloPolicy.exact_scalars``: the analyst's own session, or an operator's explicit consent) and no
    suppression, rounding or noise is set. Everywhere else it leaves on a grid (``scalar_grid``) or as a bound."""
    return bool(gate.policy.exact_scalars) and unprotected(gate)


def rows_of_grid(gate) -> int:
    """How many rows' worth one step of a scalar's grid is: the minimum cluster size, or the rounding base
    where it is larger (a sum rounded to it hides the contribution of about half as many rows, as rounding a
    count to that base does)."""
    return int(max(gate.min_size, int(gate.privacy.round_to)))


def scalar_grid(gate, row_worth) -> np.ndarray | float:
    """The grid of a scalar sum over rows whose one row's worth is ``row_worth`` (a function of what the
    server sent or knows, never of the rows): ``rows_of_grid`` rows' worth, or 0 (exact) where
    ``scalars_exact``."""
    if scalars_exact(gate):
        return 0.0 * np.asarray(row_worth, dtype=np.float64)
    return rows_of_grid(gate) * np.asarray(row_worth, dtype=np.float64)


def on_grid(values, grid):
    """``values`` rounded to the nearest multiple of ``grid`` (halves up; elementwise; a grid of 0 keeps the
    value), as a float or an array like ``values``."""
    v = np.asarray(values, dtype=np.float64)
    g = np.broadcast_to(np.asarray(grid, dtype=np.float64), v.shape)
    out = np.where(g > 0, np.floor(v / np.where(g > 0, g, 1.0) + 0.5) * g, v)
    return float(out) if np.ndim(values) == 0 else out


def predictive_entropy(n_modalities, pi: np.ndarray, profiles: np.ndarray) -> np.ndarray:
    """One row's worth of log density under draws ``(pi (R, C), profiles (R, C, P))``: the entropy of the
    model's predictive of each variable summed over variables, per draw (R,); at least 1e-3. An upper bound of
    a typical row's ``-log p(x_i)`` from the parameters alone, so a grid of it says nothing of the rows."""
    offsets = profile_offsets(n_modalities)
    pi = np.atleast_2d(np.asarray(pi, dtype=np.float64))
    profiles = np.asarray(profiles, dtype=np.float64)
    if profiles.ndim == 2:
        profiles = profiles[None]
    marginal = np.einsum("rc,rcp->rp", pi / pi.sum(axis=1, keepdims=True), profiles)
    marginal = marginal / np.repeat(np.add.reduceat(marginal, offsets[:-1], axis=1), np.diff(offsets), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(marginal > 0, -marginal * np.log(marginal), 0.0)
    return np.maximum(terms.sum(axis=1), 1e-3)
