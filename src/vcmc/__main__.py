"""``python -m vcmc``: the ``vcmc`` command."""

import sys

from vcmc.cli import main

sys.exit(main())
