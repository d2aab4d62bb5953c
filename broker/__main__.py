"""`python -m broker [options]`: run the broker (see `broker.main`)."""

import sys

from broker.main import main

sys.exit(main())
