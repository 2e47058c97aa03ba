"""The silo's budget across runs: how many runs a server may start in a time window (``vcmc.silo.gate``).

Every other budget of the gate is per run, and a server can start many runs (each with fresh budgets and,
under DP, a fresh epsilon). The operator bounds that with ``max-runs-per-day``: the ledger, a JSON file in
the operator's ``budget-dir`` on the silo's host (it outlives runs, unlike Flower's node state), records the
run key and time of each run's first summarize request; a new run is refused once the runs of the last 24
hours reach the limit. A request of a run already recorded (a retried summarize) is not counted again.
The file is rewritten atomically (``vcmc.atomic``) under an exclusive lock (``fcntl``), so two ClientApp
processes of the same SuperNode count each run once. It holds run keys and times, nothing of the data.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from pathlib import Path

from vcmc.atomic import atomic_write_json
from vcmc.exceptions import ConfigError, DisclosureError

WINDOW_SECONDS = 24 * 3600
LEDGER_NAME = "vcmc-run-ledger.json"


@contextlib.contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{LEDGER_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def admit_run(folder, run_key: str, limit: int, *, silo: str, now: float | None = None) -> int:
    """Record ``run_key`` in the ledger of ``folder`` (once) and return how many runs the window holds with it;
    raises ``DisclosureError`` when it is a new run and the window already holds ``limit`` runs."""
    folder = Path(folder)
    now = time.time() if now is None else float(now)
    path = folder / LEDGER_NAME
    with _locked(folder):
        try:
            runs = json.loads(path.read_text())["runs"] if path.is_file() else []
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"silo {silo!r}: its run ledger {LEDGER_NAME} in budget-dir cannot be read; its "
                              "operator must repair or remove it") from None
        recent = [r for r in runs if now - float(r["time"]) < WINDOW_SECONDS]
        if any(r["run"] == run_key for r in runs):
            return len(recent)
        if len(recent) >= int(limit):
            raise DisclosureError(f"silo {silo!r}: its operator allows at most {int(limit)} runs in 24 hours "
                                  "(max-runs-per-day); this run is refused")
        # older entries are kept only as long as they count, so the file stays small
        atomic_write_json(path, {"runs": [*recent, {"run": str(run_key), "time": now}]})
        return len(recent) + 1
