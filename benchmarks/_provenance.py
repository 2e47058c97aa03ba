"""What every committed benchmark result records about how it was made (imported by the scripts beside it:
a script's own folder is on ``sys.path`` when it runs as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit() -> str | None:
    """The commit of the checkout the benchmark runs from (None outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
