"""Space-filling starting points: Latin hypercube mapped onto each weight simplex (docs/design.md §7.3).

A Latin hypercube of N points in ``[0, 1]^m`` (``scipy.stats.qmc.LatinHypercube``), with
``m = sum_b (|S_b| - 1)`` free coordinates, is cut into one sub-vector per block and sent onto the block's
simplex by the inverse Rosenblatt transformation of the uniform (Dirichlet(1)) distribution, following
Zhang, Zhang & Zhou (2020) as cited by the paper.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import qmc

from vcmc._rng import as_generator
from vcmc.aggregation.weights import BlockLayout, project_simplex


def inverse_rosenblatt_simplex(u: np.ndarray) -> np.ndarray:
    """Map points of ``[0, 1]^(k-1)`` onto the simplex of ``k`` coordinates, uniform target.

    The uniform distribution on the simplex factorises into sequential Beta variables:
    ``w_j = (1 - sum_{i<j} w_i) B_j`` with ``B_j ~ Beta(1, k - j)``, whose quantile function is
    ``1 - (1 - u)^(1 / (k - j))`` (docs/design.md §7.3). The map sends the uniform distribution on the
    cube to the uniform distribution on the simplex, so a space-filling cube design stays spread out.

    Parameters
    ----------
    u : ndarray of shape (N, k - 1)

    Returns
    -------
    ndarray of shape (N, k)
    """
    u = np.asarray(u, dtype=np.float64)
    n, km1 = u.shape
    k = km1 + 1
    j = np.arange(1, k)                                        # 1..k-1
    b = 1.0 - (1.0 - u) ** (1.0 / (k - j))                     # Beta(1, k - j) quantiles, (N, k-1)
    # remaining mass before coordinate j is prod_{i<j} (1 - B_i)
    remain = np.concatenate([np.ones((n, 1)), np.cumprod(1.0 - b, axis=1)], axis=1)   # (N, k)
    w = np.empty((n, k))
    w[:, :km1] = remain[:, :km1] * b
    w[:, km1] = remain[:, km1]
    return w


def latin_hypercube_blocks(layout: BlockLayout, n: int, rng=None, floor: float = 0.0) -> np.ndarray:
    """``n`` space-filling starts as padded blocks ``(n, n_blocks, S)``.

    One Latin hypercube over all free coordinates of all blocks (blocks of a single silo are fixed at 1
    and use none), mapped block by block with ``inverse_rosenblatt_simplex``, then floored.
    """
    gen = as_generator(rng)
    sizes = layout.block_size
    free = np.maximum(sizes - 1, 0)
    m = int(free.sum())
    out = np.where(layout.mask, 1.0, 0.0)[None].repeat(n, axis=0)
    if m == 0:
        return out
    u = qmc.LatinHypercube(d=m, rng=gen).random(n)            # (n, m)
    # loop over the distinct block sizes (at most S of them), vectorised over the blocks of each size
    for k in np.unique(sizes[sizes > 1]):
        idx = np.nonzero(sizes == k)[0]
        cols = np.concatenate([np.arange(int(np.sum(free[:b])), int(np.sum(free[:b])) + k - 1)
                               for b in idx])
        sub = u[:, cols].reshape(n * idx.size, k - 1)
        w = inverse_rosenblatt_simplex(sub).reshape(n, idx.size, k)
        rows = np.zeros((n, idx.size, layout.n_silos))
        # scatter each block's k weights onto its present silos (same order as the mask)
        pos = np.nonzero(layout.mask[idx])
        rows[:, pos[0], pos[1]] = w.reshape(n, idx.size * k)
        out[:, idx, :] = rows
    if floor > 0:
        out = project_simplex(out, layout.mask[None], floor)
    return out
