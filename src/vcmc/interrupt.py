"""Long calls that must not delay Ctrl-C, SIGTERM or SIGHUP (docs/design.md §4.1).

Python runs a signal's handler in the main thread between bytecodes, so a single long call into compiled
code delays it until the call returns. The longest such call of a run is the first call of the sampler's
kernels on a fresh checkout: numba compiles them (a minute, several on a loaded machine). ``interruptible``
makes such a call in a worker thread while the main thread waits in short, interruptible joins: the
signal's ``KeyboardInterrupt`` is raised at once, and the worker (a daemon thread) is left behind to die
with the process. The sampler's own blocks are short (``SamplerConfig.block_size`` iterations) and the
handler runs between them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

#: Seconds between two checks of the main thread while it waits.
POLL = 0.1


def interruptible[T](fn: Callable[..., T], *args, **kwargs) -> T:
    """``fn(*args, **kwargs)``, run so that a signal's ``KeyboardInterrupt`` reaches the main thread at once.

    Outside the main thread (a worker process's thread, a notebook's worker) it is a plain call.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as err:   # noqa: BLE001 - handed to the caller's thread below
            box["error"] = err

    worker = threading.Thread(target=target, name="vcmc-interruptible", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL)
    if "error" in box:
        raise box["error"]
    return box["value"]
