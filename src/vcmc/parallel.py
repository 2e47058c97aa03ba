"""Process-parallel map for chains and silos (docs/design.md §12.5).

Chains and silos run in separate processes: a numba Gibbs sweep is serial per chain (a Generator must not
be shared across threads, docs/design.md §12.5), so parallelism comes from independent work items. All
randomness must come from the items (e.g. one spawned ``SeedSequence`` per item), so results never depend
on ``jobs``.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from vcmc.exceptions import ConfigError
from vcmc.progress import progress_bar

__all__ = ["parallel_map", "resolve_jobs"]


def resolve_jobs(jobs: int | None, n_items: int) -> int:
    """Number of worker processes: ``jobs`` (``-1`` or ``None`` = one per CPU), capped at ``n_items``."""
    if jobs is None or jobs == -1:
        jobs = os.cpu_count() or 1
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ConfigError(f"The 'jobs' parameter of parallel_map must be an int >= 1 or -1 (all CPUs). Got "
                          f"{jobs!r} instead.")
    return max(1, min(jobs, n_items))


def parallel_map(fn: Callable[[Any], Any], items: Sequence, *, jobs: int | None = 1,
                 progress_desc: str | None = None) -> list:
    """Apply ``fn`` to every item, serially or in a process pool; results in input order.

    Parameters
    ----------
    fn : callable
        A picklable (module-level) function of one item.
    items : sequence
        Picklable work items; all randomness must come from them (e.g. a spawned SeedSequence each).
    jobs : int or None
        ``1``: serial in this process (no pickling). ``> 1``: that many worker processes (capped at the
        number of items). ``-1`` or ``None``: one per CPU.
    progress_desc : str or None
        If given, a progress bar over items with this description (silent in CI / non-tty).

    Returns
    -------
    list
        ``[fn(item) for item in items]``.

    Raises
    ------
    Exception
        The exception of the first failing item (in input order among those that failed first), re-raised
        with its original type and a note saying which item failed; remaining work is cancelled.

    Notes
    -----
    Workers are started with the ``spawn`` method: forking a process that already runs threads (numba,
    OpenMP, tqdm) can deadlock and is deprecated by Python 3.12, and ``spawn`` behaves the same on every OS.
    The numba on-disk cache makes compiled kernels load quickly in the workers.
    """
    items = list(items)
    n = len(items)
    n_jobs = resolve_jobs(jobs, n) if n else 1
    results: list = [None] * n
    with progress_bar(n, progress_desc or "", enabled=None if progress_desc else False, unit="item") as bar:
        if n_jobs == 1:
            for i, item in enumerate(items):
                try:
                    results[i] = fn(item)
                except Exception as exc:
                    exc.add_note(f"raised by parallel_map while processing item {i} of {n}")
                    raise
                bar.update(1)
            return results
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx) as pool:
            futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=futures.__getitem__):
                    i = futures[fut]
                    exc = fut.exception()
                    if exc is not None:
                        for other in pending:
                            other.cancel()
                        exc.add_note(f"raised by parallel_map in a worker process while processing item {i} "
                                     f"of {n}")
                        raise exc
                    results[i] = fut.result()
                    bar.update(1)
    return results
