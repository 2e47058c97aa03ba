"""The one check of integer codes, used by every entry point that takes a silo's encoded data.

Codes are ``0..K^q - 1`` per variable ``q`` and ``-1`` (``vcmc.model.MISSING``) for a missing value. The
messages name the argument or silo and the column, never a value: they may be raised inside a silo, and
what a silo says crosses the boundary.
"""

from __future__ import annotations

import numpy as np

from vcmc.exceptions import DataError
from vcmc.model import MISSING

__all__ = ["check_codes", "check_modalities"]


def check_modalities(n_modalities, *, minimum: int = 1, where: str = "n_modalities") -> np.ndarray:
    """``K^q`` of every variable as an int64 array; each at least ``minimum``."""
    k = np.asarray(n_modalities)
    if k.ndim != 1 or k.size == 0 or not np.issubdtype(k.dtype, np.integer) or np.any(k < minimum):
        raise DataError(f"{where} must be a non-empty sequence of ints >= {minimum} (the number of modalities "
                        f"K^q of each variable); got shape {k.shape}, dtype {k.dtype}")
    return k.astype(np.int64)


def check_codes(codes, n_modalities, *, where: str = "codes", dtype=None, min_rows: int = 1,
                min_modalities: int = 1) -> np.ndarray:
    """Check a silo's codes against the modalities; return them (as ``dtype`` when given).

    Parameters
    ----------
    codes : array_like of shape (n, Q), int
    n_modalities : sequence of int
    where : str
        How the message names the data (e.g. ``"silo 'B'"``).
    dtype : numpy dtype, optional
        Return a C-contiguous copy of this dtype (e.g. int16 for the sampler's layout).
    min_rows : int
        Fewest rows accepted (default 1).
    min_modalities : int
        Fewest modalities accepted per variable (default 1).

    Raises
    ------
    DataError
        Naming ``where`` and the first offending column; never a data value.
    """
    k = check_modalities(n_modalities, minimum=min_modalities)
    x = np.asarray(codes)
    if x.ndim != 2:
        raise DataError(f"{where} must be a 2-D array (rows x variables); got {x.ndim} dimension(s)")
    if x.shape[1] != k.size:
        raise DataError(f"{where} has {x.shape[1]} columns but n_modalities lists {k.size} variables")
    if x.shape[0] < min_rows:
        raise DataError(f"{where} has {x.shape[0]} row(s); at least {min_rows} needed")
    if not np.issubdtype(x.dtype, np.integer):
        raise DataError(f"{where} must hold integer codes (0..K^q-1, {MISSING} for a missing value); got dtype "
                        f"{x.dtype}")
    bad = ((x < 0) & (x != MISSING)) | (x >= k[None, :])
    if bad.any():
        cols = np.flatnonzero(bad.any(axis=0))
        q = int(cols[0])
        more = f" (and {cols.size - 1} other column(s))" if cols.size > 1 else ""
        raise DataError(f"{where}: column {q} holds codes outside 0..{int(k[q]) - 1} ({MISSING} for a missing "
                        f"value){more}")
    return x if dtype is None else np.ascontiguousarray(x, dtype=dtype)
