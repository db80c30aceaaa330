"""`python -m simulator`: run the cluster simulator (a TEST DOUBLE) from the
command line."""

import sys

from simulator.cli import main

sys.exit(main())
