"""`python -m netsim.cli ARGS`, as the `netsim` console script."""

import sys

from . import main

sys.exit(main())
