"""Dirichlet draws that do not underflow for tiny concentrations, shared by every part of the library.

A leaf module: the silo's oracle posteriors, the server's placeholder slots and the simulators draw from
here.
"""

from __future__ import annotations

import numpy as np

from vcmc.model import profile_offsets

__all__ = ["sample_dirichlet_blocks"]


def sample_dirichlet_blocks(concentration: np.ndarray, n_modalities, n_draws: int,
                            rng: np.random.Generator) -> np.ndarray:
    """Independent Dirichlet draws for every variable block of every cluster.

    Parameters
    ----------
    concentration : ndarray of shape (K, P)
        Dirichlet parameters; the columns of variable q are ``offsets[q]:offsets[q+1]``.
    n_modalities : sequence of int
    n_draws : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_draws, K, P)
        Each variable block sums to 1.

    Notes
    -----
    Drawn in log space with ``log G_a = log G_{a+1} + log(U) / a`` (Marsaglia and Tsang's boost), so that
    concentrations well below 1 (unfractionated sparse priors, empty modalities) do not underflow to a
    block of zeros as plain ``standard_gamma`` draws do.
    """
    conc = np.asarray(concentration, dtype=np.float64)
    shape = (n_draws,) + conc.shape
    log_g = np.log(rng.standard_gamma(conc + 1.0, size=shape)) + np.log(rng.random(size=shape)) / conc
    offsets = profile_offsets(n_modalities)
    starts = offsets[:-1]
    # per-block log-sum-exp: subtract the block maximum, exponentiate, normalise
    block_max = np.maximum.reduceat(log_g, starts, axis=-1)
    widths = np.diff(offsets)
    g = np.exp(log_g - np.repeat(block_max, widths, axis=-1))
    totals = np.add.reduceat(g, starts, axis=-1)
    return g / np.repeat(totals, widths, axis=-1)
