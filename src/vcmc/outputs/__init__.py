"""One writer discipline for every command that writes results (``fit``, ``predict``, ``report``, ``study``,
``simulate``, ``schema``), in small modules by responsibility:

* :mod:`~vcmc.outputs.folder`: ``--out`` is a writable folder, held by one run at a time, cleaned of the
  temporary files of a killed run; stale result files removed after ``--overwrite``.
* :mod:`~vcmc.outputs.lock`: the lock on an output folder (``fcntl.flock``: released by the kernel when its
  process dies, so the lock of a killed run never needs clearing by hand).
* :mod:`~vcmc.outputs.runkey`: what identifies a run (its key), the folder's manifest, the refusal of
  another run's results, and the sealed result set that ``predict`` and ``report`` check.
* :mod:`~vcmc.outputs.space`: the rough estimate of what a fit writes and the free-space check.
* :mod:`~vcmc.outputs.messages`: how a run that cannot finish says so (interrupted, a failed write).
* :mod:`~vcmc.outputs.signals`: SIGTERM and SIGHUP end a run like Ctrl-C.

Server / command-line side only: nothing here runs inside a silo.
"""

from vcmc.outputs.folder import OUTPUT_NAMES, RESULT_NAMES, OutputError, check_out_dir, remove_stale
from vcmc.outputs.runkey import RUN_MANIFEST, check_previous_run, check_result_set, run_key, seal_results

__all__ = ["OUTPUT_NAMES", "RESULT_NAMES", "RUN_MANIFEST", "OutputError", "check_out_dir", "check_previous_run",
           "check_result_set", "remove_stale", "run_key", "seal_results"]
