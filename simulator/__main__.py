"""`python -m rackguard.simulator`: run the cluster simulator (a TEST DOUBLE) from the
command line."""

import sys

from rackguard.simulator.cli import main

sys.exit(main())
