"""Disclosure control of what a silo computes, applied before anything is sent (docs/design.md §13).

Three independent layers, each configured per silo by its operator (``PrivacyConfig``; the server can
only tighten them, see ``effective_privacy``):

1. **Minimum cluster size** (``apply_min_cluster_size``). The draws of a local cluster with a handful of
   members describe those few people, so the members of clusters below ``min_cluster_size`` are
   reallocated to their most probable remaining cluster before the summary is built; the summary reports
   only *how many* clusters were merged (``n_withheld``).
2. **Small-cell suppression and rounding** of the contingency table (``protect_counts``): cells with a
   count in ``[1, suppress_cells_below)`` are sent as 0, with complementary suppression so a suppressed
   cell cannot be recovered as "cluster size minus the other cells"; then counts are rounded to the nearest
   multiple of ``round_to``. This follows the NHS/OpenSAFELY practice (suppress 1-7, round to 5). It is
   **not differential privacy**: it gives no guarantee against an attacker with side information or
   against differencing between repeated releases.
3. **Differential privacy** (``dp_noise``): discrete Laplace noise on the count table from OpenDP's
   vetted, cryptographically seeded sampler, with L1 sensitivity = the number of variables (one person
   adds one count per variable), applied before suppression and rounding (which are then free
   post-processing). The guarantee covers the count table only and assumes the cluster assignment is
   fixed; the posterior draws and cluster sizes are not noised, so the summary as a whole is not DP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vcmc._rng import RngLike, as_generator
from vcmc.config import PrivacyConfig
from vcmc.exceptions import ConfigError, DisclosureError
from vcmc.model import profile_offsets

if TYPE_CHECKING:
    from vcmc.mcmc.posterior import LocalPosterior


def effective_privacy(operator: PrivacyConfig, server: PrivacyConfig | None) -> PrivacyConfig:
    """The stricter of the silo operator's limits and the server's request, option by option.

    The server can tighten a silo's disclosure control but never loosen it: larger minimum sizes,
    suppression thresholds and rounding bases win, the smaller epsilon wins, and counts are shared only if
    both allow it.
    """
    if server is None:
        return operator
    eps = [e for e in (operator.dp_epsilon, server.dp_epsilon) if e is not None]
    noise = [e for e in (operator.sum_noise, server.sum_noise) if e is not None]
    return PrivacyConfig(
        min_cluster_size=max(operator.min_cluster_size, server.min_cluster_size),
        suppress_cells_below=max(operator.suppress_cells_below, server.suppress_cells_below),
        round_to=max(operator.round_to, server.round_to),
        dp_epsilon=min(eps) if eps else None,
        share_counts=bool(operator.share_counts and server.share_counts),
        share_assessment=bool(operator.share_assessment and server.share_assessment),
        sum_precision=max(operator.sum_precision, server.sum_precision),
        sum_noise=max(noise) if noise else None,
    )


def apply_min_cluster_size(local: LocalPosterior, codes: np.ndarray, privacy: PrivacyConfig, *,
                           floor: int = 0) -> tuple[LocalPosterior, int]:
    """Merge local clusters with fewer than ``max(privacy.min_cluster_size, floor, 1)`` members.

    Members of a small cluster move to their most probable remaining cluster
    (``vcmc.mcmc.postprocess.reallocate_small_clusters``), so no draw describing fewer people than the
    threshold leaves the silo. Empty clusters are always dropped.

    Parameters
    ----------
    local : LocalPosterior
    codes : ndarray of shape (n_rows, Q)
    privacy : PrivacyConfig
    floor : int
        Another lower bound on the size (e.g. ``PostprocessConfig.threshold(n_rows)``).

    Returns
    -------
    local : LocalPosterior
        Every cluster has at least the threshold's members.
    n_merged : int
        Number of local clusters merged away (the only thing reported about them).

    Raises
    ------
    DisclosureError
        If the silo has fewer rows than the threshold: no cluster can be sent.
    """
    from vcmc.mcmc.postprocess import reallocate_small_clusters

    threshold = max(int(privacy.min_cluster_size), int(floor), 1)
    n_rows = int(local.partition.shape[0])
    if n_rows < threshold:
        raise DisclosureError(f"the silo has fewer rows than the minimum cluster size ({threshold}); no "
                              "cluster can be sent under its disclosure limits")
    k_before = local.n_clusters
    out = reallocate_small_clusters(local, codes, threshold)
    sizes = out.cluster_sizes
    if sizes.size == 0 or sizes.min() < threshold:  # defensive: the reallocation must guarantee this
        raise DisclosureError(f"a local cluster below the minimum cluster size ({threshold}) would be sent")
    return out, int(k_before - out.n_clusters)


def discrete_laplace_variance(scale: float) -> float:
    """Variance of the discrete Laplace law P(k) ~ exp(-|k| / scale): 2q / (1 - q)^2 with q = e^(-1/scale)."""
    q = np.exp(-1.0 / scale)
    return float(2.0 * q / (1.0 - q) ** 2)


def dp_noise(counts: np.ndarray, epsilon: float, sensitivity: int, *, rng: RngLike = None,
             secure: bool = True) -> np.ndarray:
    """Add discrete Laplace noise of scale ``sensitivity / epsilon`` to an integer table (epsilon-DP).

    Parameters
    ----------
    counts : ndarray of int
    epsilon : float
        Privacy loss of this release (releases compose: each gradient round spends budget again).
    sensitivity : int
        L1 sensitivity of the table to adding or removing one person (the number of variables for a
        cluster-by-modality table, assuming the cluster assignment is fixed).
    rng : int, Generator or None
        Used only when ``secure=False``.
    secure : bool
        True (default, deployment): OpenDP's sampler, seeded from the operating system; deliberately not
        reproducible from the run's seed (noise that can be regenerated from a seed can be removed).
        False: numpy sampling from ``rng`` (difference of two geometric variables), for reproducible
        simulation studies of the effect of noise only.

    Returns
    -------
    ndarray of int64, the same shape (values may be negative; clamp as post-processing).
    """
    counts = np.asarray(counts)
    if not (epsilon > 0) or sensitivity < 1:
        raise ConfigError(f"dp_noise needs epsilon > 0 and sensitivity >= 1; got epsilon={epsilon!r}, "
                          f"sensitivity={sensitivity!r}")
    if counts.size and not np.all(np.equal(np.mod(counts, 1), 0)):
        raise ConfigError("dp_noise adds integer noise to integer counts; got non-integer counts")
    flat = counts.astype(np.int64).ravel()
    scale = float(sensitivity) / float(epsilon)
    if flat.size == 0:
        return flat.reshape(counts.shape)
    if secure:
        try:
            import opendp.prelude as dp
        except ImportError as exc:  # pragma: no cover - opendp is the [dp] extra
            raise ConfigError("differential privacy (PrivacyConfig.dp_epsilon) needs OpenDP: "
                              "pip install 'vcmc[dp]'") from exc
        dp.enable_features("contrib")
        space = (dp.vector_domain(dp.atom_domain(T="i64"), size=int(flat.size)), dp.l1_distance(T="i64"))
        meas = space >> dp.m.then_laplace(scale=scale)
        # OpenDP's own accounting must agree with ours (guards against a change of parametrisation).
        realised = float(meas.map(d_in=int(sensitivity)))
        if realised > epsilon * (1 + 1e-9):
            raise ConfigError(f"OpenDP reports epsilon {realised} > requested {epsilon}")
        noisy = np.asarray(meas(flat.tolist()), dtype=np.int64)
    else:
        gen = as_generator(rng)
        p = -np.expm1(-1.0 / scale)  # 1 - e^(-1/scale), accurate for large scales
        noisy = flat + gen.geometric(p, size=flat.size) - gen.geometric(p, size=flat.size)
    return noisy.reshape(counts.shape)


PERSON = 0.5
"""Withheld entries whose sum the receiver can compute and that add up to less than half a person hide nobody
(soft sums: fractions of many rows' memberships): they need no complement."""


def complementary_withholding(values, withheld, families, threshold: float, *, also=(),
                              primary_max: float | None = None) -> np.ndarray:
    """The withheld entries, grown until no sum the receiver knows gives a withheld entry back.

    Each family of ``families`` is one kind of relation the receiver knows: ``families[f][n]`` is the group of
    entry ``n`` (-1: in no group of that kind), and the receiver knows (or can learn) the sum of every group
    (a vector of cluster counts and the silo's row count; a (cluster, variable) block of a table and the
    cluster's size; a column of a table and the silo's count of that modality). In every group the withheld
    entries that are not 0 must then be none, or at least two that add up to at least ``threshold`` (then the
    receiver learns the sum of a group of at least ``threshold``, as of a merged cluster, and cannot tell how
    it splits: every withheld entry has several values, one of them at least ``threshold``, that give the same
    release, even to a receiver who knows this rule; tests/test_disclosure.py enumerates them). Where that
    fails, the smallest entry of the group that is neither withheld nor 0 is withheld too (with every entry
    equal to it), and so on over every group of every family until none changes. ``also``: further arrays of the
    same shape whose withheld sums must reach ``threshold`` as well (the expected counts beside the counts of
    an assign reply); the smallest of ``values`` is withheld first.

    A group holding fewer than two entries to withhold keeps what it has: its sum is then what it is (a
    block whose people all share one value and whose cluster size is sent).

    ``primary_max``: the largest value the primary rule withholds (under ``threshold``, or more where rounding
    takes it under). A group whose withheld entries are all primaries is also grown when their sum pins each of
    them (every one at ``primary_max``, or every one at 1: counts of 5 and 5 under a limit of 6, withheld
    beside a 6, are 5 and 5 to a receiver who knows their sum and this rule).

    Parameters
    ----------
    values : ndarray of float or int, any shape, >= 0
    withheld : ndarray of bool, the same shape
        The primary withholding (entries under the limit).
    families : sequence of ndarray of int, each the shape of ``values``
    threshold : float

    Returns
    -------
    ndarray of bool, the shape of ``values``: the primary and the complementary entries.
    """
    v = np.asarray(values, dtype=np.float64)
    shape = v.shape
    v = v.ravel()
    out = np.array(withheld, dtype=bool, copy=True).ravel()
    sums = [v] + [np.asarray(a, dtype=np.float64).ravel() for a in also]
    positive = np.any([a > 0 for a in sums], axis=0)
    prepared = []
    for family in families:
        g = np.asarray(family, dtype=np.int64).ravel()
        member = g >= 0
        if not member.any():
            continue
        n_groups = int(g.max()) + 1
        order = np.argsort(np.where(member, g, n_groups), kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(g[member], minlength=n_groups))])
        prepared.append((g, member, n_groups, order, starts))
    changed = bool(out.any())
    while changed:
        changed = False
        for g, member, n_groups, order, starts in prepared:
            hidden = out & positive & member
            ids = g[hidden]
            n_hidden = np.bincount(ids, minlength=n_groups)
            totals = [np.bincount(ids, weights=a[hidden], minlength=n_groups) for a in sums]
            need = np.zeros(n_groups, dtype=bool)
            for a, t in zip(sums, totals, strict=True):
                # one withheld entry that is not 0 in this array (others withheld beside it may be 0 here: an
                # expected count under the limit beside a count of 0) is given back by the group's sum
                n_positive = np.bincount(ids, weights=(a[hidden] > 0).astype(np.float64), minlength=n_groups)
                need |= (n_positive == 1) & (t >= PERSON)
                need |= (n_hidden > 0) & (t >= PERSON) & (t < threshold)
            if primary_max is not None:
                big = np.bincount(ids, weights=(v[hidden] > primary_max).astype(np.float64), minlength=n_groups)
                pinned = (totals[0] >= n_hidden * float(primary_max) - 1e-9) | (totals[0] <= n_hidden + 1e-9)
                need |= (n_hidden >= 2) & (big == 0) & pinned
            for grp in np.flatnonzero(need):     # the few groups that give something back, not every cell
                cells = order[starts[grp]:starts[grp + 1]]
                free = cells[positive[cells] & ~out[cells]]
                if free.size:
                    # the smallest, and every entry equal to it: a receiver who knows this rule could otherwise
                    # read a bound of the withheld complement off the equal entry left in the release
                    out[free[v[free] == v[free].min()]] = True
                    changed = True
    return out.reshape(shape)


def table_families(shape, n_modalities, *, rows=None, columns: bool = False) -> list[np.ndarray]:
    """The groups of a table ``(..., K, P)`` whose sums a receiver knows: each (leading index, row, variable)
    block of the rows in ``rows`` (bool ``(..., K)``; default every row), whose sum is the row's size (sent)
    less its missing values; and with ``columns`` each (leading index, column) across the rows, whose sum is
    the silo's count of that modality (every row of the silo is in some row of the table)."""
    offsets = profile_offsets(n_modalities)
    if shape[-1] != offsets[-1]:
        raise ConfigError(f"counts have {shape[-1]} columns; the schema has {int(offsets[-1])}")
    n_var = offsets.size - 1
    variable = np.repeat(np.arange(n_var), np.diff(offsets))
    row_index = np.arange(int(np.prod(shape[:-1]))).reshape(shape[:-1])
    blocks = row_index[..., None] * n_var + variable
    if rows is not None:
        blocks = np.where(np.asarray(rows, dtype=bool)[..., None], blocks, -1)
    out = [blocks]
    if columns:
        lead = np.arange(int(np.prod(shape[:-2]))).reshape(shape[:-2])
        out.append(np.broadcast_to(lead[..., None, None] * shape[-1] + np.arange(shape[-1]), shape))
    return out


def pair_families(pairs, n_modalities) -> list[np.ndarray]:
    """The groups of co-occurrence counts (of the flat profile columns ``pairs`` (E, 2)) whose sums a receiver
    knows: the pairs of one column ``a`` with every column of another variable sum to the rows with ``a`` and
    that variable observed (the count of ``a`` where it has no missing values), and likewise the other way;
    only complete groups (every column of the variable asked for) have a known sum. -1: in no group."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    offsets = profile_offsets(n_modalities)
    variable = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    width = np.diff(offsets)
    out = []
    for own, other in ((0, 1), (1, 0)):
        key = pairs[:, own] * (offsets.size - 1) + variable[pairs[:, other]]
        ids = np.full(pairs.shape[0], -1, dtype=np.int64)
        if pairs.size:
            uniq, inverse = np.unique(key, return_inverse=True)
            distinct = np.unique(np.stack([key, pairs[:, other]], axis=1), axis=0)
            n_cols = np.bincount(np.searchsorted(uniq, distinct[:, 0]), minlength=uniq.size)
            complete = n_cols == width[uniq % (offsets.size - 1)]
            ids = np.where(complete[inverse], inverse, -1)
        out.append(ids)
    return out


def small_cells(counts: np.ndarray, below: int, round_to: int = 1) -> np.ndarray:
    """Cells under the suppression threshold ``below``, before rounding or after it (a cell that rounding would
    take under the threshold is small too, so a released cell is never under it)."""
    v = np.asarray(counts, dtype=np.float64)
    if below <= 1:
        return np.zeros(v.shape, dtype=bool)
    rounded = v if round_to <= 1 else np.floor(v / round_to + 0.5) * round_to
    return (v > 0) & ((v < below) | (rounded < below))


def primary_max(below: float, round_to: int = 1) -> int:
    """The largest count the primary rule withholds (``small_cells``): under ``below``, or rounded under it."""
    x = max(int(np.ceil(below)) - 1, 0)
    while small_cells(np.asarray([x + 1.0]), below, round_to)[0]:
        x += 1
    return x


def suppress_small_cells(counts: np.ndarray, below: int, n_modalities, *, columns: bool = False,
                         round_to: int = 1, families=None) -> tuple[np.ndarray, int]:
    """Set cells with a count in ``[1, below)`` (before or after rounding to ``round_to``) to 0, with
    complementary suppression.

    Each (cluster, variable) block sums to the cluster's size minus its missing values, and sizes are sent;
    with ``columns`` each column sums to the silo's count of that modality (a cluster-by-modality table of
    every row of the silo). A suppressed cell must not follow from those sums: ``complementary_withholding``
    suppresses further cells until every such sum hides at least two cells adding up to ``below`` or more.
    ``families``: other groups with known sums instead of the table's (``pair_families``).

    Returns
    -------
    counts : ndarray of int64
    n_suppressed : int
        Cells suppressed, primary plus complementary.
    """
    out = np.array(counts, dtype=np.int64, copy=True)
    if below <= 1 or out.size == 0:
        return out, 0
    primary = small_cells(out, below, round_to)
    if families is None:
        families = table_families(out.shape, n_modalities, columns=columns)
    if not primary.any():
        return out, 0
    suppressed = complementary_withholding(out, primary, families, float(below),
                                           primary_max=primary_max(below, round_to))
    out[suppressed] = 0
    return out, int(np.count_nonzero(suppressed))


def round_counts(counts: np.ndarray, base: int) -> np.ndarray:
    """Round to the nearest multiple of ``base`` (halves up), as in the NHS/OpenSAFELY rules."""
    out = np.asarray(counts, dtype=np.int64)
    if base <= 1:
        return out.copy()
    return (np.floor_divide(2 * out + base, 2 * base) * base).astype(np.int64)


def protect_counts(counts: np.ndarray, privacy: PrivacyConfig, rng: RngLike = None, *,
                   n_modalities=None, secure: bool = True, columns: bool = False) -> tuple[np.ndarray, int]:
    """Disclosure control of a cluster-by-modality count table, in the order DP -> suppress -> round.

    Noise first (on the true counts), then clamping at 0, suppression and rounding, which are
    post-processing and so keep the DP guarantee.

    Parameters
    ----------
    counts : ndarray of shape (K, P), int
    privacy : PrivacyConfig
    rng : int, Generator or None
        Only used by ``dp_noise(secure=False)``.
    n_modalities : sequence of int, optional
        Modalities per variable (needed for complementary suppression and the DP sensitivity); default:
        the table is one variable.
    secure : bool
        See ``dp_noise``.
    columns : bool
        The table holds every row of the silo (a summary's table): its column sums are the silo's modality
        counts, which a receiver may know, so suppression complements cells within columns too.

    Returns
    -------
    counts : ndarray of int64
    n_suppressed : int
    """
    counts = np.asarray(counts)
    if n_modalities is None:
        n_modalities = (counts.shape[-1],)
    out = counts.astype(np.int64)
    if privacy.dp_epsilon is not None:
        out = np.maximum(dp_noise(out, privacy.dp_epsilon, len(n_modalities), rng=rng, secure=secure), 0)
    out, n_suppressed = suppress_small_cells(out, privacy.suppress_cells_below, n_modalities, columns=columns,
                                             round_to=privacy.round_to)
    out = round_counts(out, privacy.round_to)
    return out, n_suppressed
