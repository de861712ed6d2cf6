"""``python -m s2o_kernel.engine.worker``: the containment worker's entry point (see :mod:`.server`)."""

import sys

from .server import main

sys.exit(main())
