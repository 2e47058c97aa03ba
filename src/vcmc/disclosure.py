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


def suppress_small_cells(counts: np.ndarray, below: int, n_modalities) -> tuple[np.ndarray, int]:
    """Set cells with a count in ``[1, below)`` to 0, with complementary suppression per variable block.

    Each (cluster, variable) block sums to the cluster's size minus its missing values, and sizes are sent,
    so a block with exactly one suppressed cell would let the server recover it. There the smallest other
    non-zero cell is suppressed too (the usual complementary suppression).

    Returns
    -------
    counts : ndarray of int64
    n_suppressed : int
        Cells suppressed, primary plus complementary.
    """
    out = np.array(counts, dtype=np.int64, copy=True)
    if below <= 1 or out.size == 0:
        return out, 0
    primary = (out >= 1) & (out < below)
    offsets = profile_offsets(n_modalities)
    if out.shape[-1] != offsets[-1]:
        raise ConfigError(f"counts have {out.shape[-1]} columns; the schema has {int(offsets[-1])}")
    block = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))           # variable of each column
    n_blocks = offsets.size - 1
    flat_block = (np.arange(out.shape[0])[:, None] * n_blocks + block[None, :])  # (K, P) block ids
    per_block = np.bincount(flat_block.ravel(), weights=primary.ravel(), minlength=out.shape[0] * n_blocks)
    lone = per_block == 1
    # complementary cell: the smallest non-zero, not yet suppressed cell of each lone block
    candidate = (out > 0) & ~primary & lone[flat_block]
    key = np.where(candidate, out, np.iinfo(np.int64).max)
    complementary = np.zeros_like(primary)
    for b in np.flatnonzero(lone):    # loop over the few lone blocks only, not over cells
        k, q = divmod(int(b), n_blocks)
        cols = np.arange(offsets[q], offsets[q + 1])
        j = cols[np.argmin(key[k, cols])]
        if candidate[k, j]:
            complementary[k, j] = True
    suppressed = primary | complementary
    out[suppressed] = 0
    return out, int(np.count_nonzero(suppressed))


def round_counts(counts: np.ndarray, base: int) -> np.ndarray:
    """Round to the nearest multiple of ``base`` (halves up), as in the NHS/OpenSAFELY rules."""
    out = np.asarray(counts, dtype=np.int64)
    if base <= 1:
        return out.copy()
    return (np.floor_divide(2 * out + base, 2 * base) * base).astype(np.int64)


def protect_counts(counts: np.ndarray, privacy: PrivacyConfig, rng: RngLike = None, *,
                   n_modalities=None, secure: bool = True) -> tuple[np.ndarray, int]:
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
    out, n_suppressed = suppress_small_cells(out, privacy.suppress_cells_below, n_modalities)
    out = round_counts(out, privacy.round_to)
    return out, n_suppressed
