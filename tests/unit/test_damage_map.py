"""DamageMap's record of CRC-checked byte ranges, against a set of the bytes marked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from storage.damage import DamageMap

marks_st = st.lists(st.tuples(st.integers(0, 200), st.integers(1, 60)), max_size=30)


@given(marks_st, st.integers(0, 200), st.integers(1, 60))
def test_verified_ranges_match_the_bytes_marked(
    marks: list[tuple[int, int]], start: int, length: int
) -> None:
    damage, checked = DamageMap(), set[int]()
    for at, n in marks:
        damage.mark_verified(at, at + n)
        checked.update(range(at, at + n))
        # Sorted, disjoint, and merged where they touch: one range per checked stretch.
        starts, ends = damage._verified_starts, damage._verified_ends
        assert all(s < e for s, e in zip(starts, ends, strict=True))
        assert all(e < s for e, s in zip(ends, starts[1:], strict=False))
    expected = all(p in checked for p in range(start, start + length))
    assert damage.verified(start, start + length) == expected


def test_appends_at_the_tail_keep_one_range() -> None:
    damage = DamageMap()
    for start in range(0, 1000, 100):
        damage.mark_verified(start, start + 100)
    assert (damage._verified_starts, damage._verified_ends) == ([0], [1000])
    damage.mark_verified(1100, 1200)  # a gap: a second range
    damage.mark_verified(1000, 1100)  # fills it: one again
    assert (damage._verified_starts, damage._verified_ends) == ([0], [1200])
    assert damage.verified(0, 1200) and not damage.verified(0, 1201)
    damage.mark_verified(50, 1300)  # a re-read from inside the range past its end
    assert (damage._verified_starts, damage._verified_ends) == ([0], [1300])
