"""Hypothesis budgets: a bounded profile for `make test`, a long one for `make hypothesis-long`.

`HYPOTHESIS_PROFILE` picks the profile (loaded by tests/conftest.py before any test module):
- `fast` (the default): 100 examples a test unless the test names its own budget through
  `examples(n)`, which is then `n`. The slowest tests (state machines, the Arrow decoder
  against its reference) name small budgets, so `make test` stays bounded.
- `long`: 20 times every budget, for a run of its own (`make hypothesis-long`).
Neither has a per-example deadline: Hypothesis's 200 ms default is a timed test, and on a
loaded CI machine it failed examples that were correct (DeadlineExceeded at 270 ms).
"""

from __future__ import annotations

import os

from hypothesis import settings

FAST_EXAMPLES = 100
PROFILES = {"fast": FAST_EXAMPLES, "long": 20 * FAST_EXAMPLES}

for _name, _examples in PROFILES.items():
    settings.register_profile(_name, max_examples=_examples, deadline=None)


def load() -> None:
    name = os.environ.get("HYPOTHESIS_PROFILE", "fast")
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: one of {sorted(PROFILES)}")
    settings.load_profile(name)


def examples(fast: int) -> int:
    """A test's example budget: `fast` under the fast profile, scaled with the profile loaded."""
    return max(1, fast * settings.default.max_examples // FAST_EXAMPLES)
