"""``python -m vcmc.cli``: the ``vcmc`` command."""

import sys

from vcmc.cli import main

sys.exit(main())
