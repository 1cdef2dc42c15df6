"""``python -m ozaki_cutlass``: the ``ozaki-cutlass`` command."""

import sys

from .tools.cli import main

sys.exit(main())
