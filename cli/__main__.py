"""`python -m cli ARGS`: the same as `shoal ARGS`."""

import sys

from cli.main import main

sys.exit(main())
