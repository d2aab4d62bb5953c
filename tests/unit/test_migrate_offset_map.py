"""`shoal migrate`'s offset map: translation of group positions across gaps, the count of
records copied above a position, and the map file's checkpoints and torn tail."""

from __future__ import annotations

from pathlib import Path

from cli.migration.offset_map import MapFile
from cli.migration.offset_map import OffsetMap


def gappy() -> OffsetMap:
    m = OffsetMap()
    m.add_run(0, 0, 10)  # source 0-9 -> target 0-9
    m.add_run(12, 10, 5)  # source 10-11 were control records: 12-16 -> 10-14
    m.add_run(20, 15, 1)  # compacted gap: 20 -> 15
    return m


def test_positions_translate_to_the_first_copied_record_at_or_after_them() -> None:
    m = gappy()
    assert [m.translate(o) for o in (0, 9, 10, 11, 12, 16, 17, 20, 21, 99)] == [
        0, 9, 10, 10, 10, 14, 15, 15, 16, 16
    ]  # fmt: skip
    assert OffsetMap().translate(5) is None


def test_runs_that_continue_merge() -> None:
    m = OffsetMap()
    m.add_pairs([(5, 0), (6, 1), (7, 2), (9, 3)])
    assert m.runs == [(5, 0, 3), (9, 3, 1)]
    assert (m.next_source, m.next_target, len(m)) == (10, 4, 4)


def test_copied_from_counts_records_at_or_above_a_source_offset() -> None:
    m = gappy()
    assert [m.copied_from(o) for o in (0, 5, 10, 13, 17, 20, 21)] == [16, 11, 6, 5, 1, 1, 0]


def test_the_file_appends_at_checkpoints_and_ignores_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0.map"
    f = MapFile(path)
    f.map.add_pairs([(0, 0), (1, 1)])
    f.checkpoint()
    f.map.add_pairs([(2, 2), (5, 3)])  # the run grows, then a new one
    f.checkpoint()
    assert MapFile(path).map.runs == [(0, 0, 3), (5, 3, 1)]
    with path.open("a") as out:
        out.write("6 4")  # a crash mid-line
    assert MapFile(path).map.runs == [(0, 0, 3), (5, 3, 1)]
    again = MapFile(path)
    again.map.add_pairs([(6, 4)])
    again.checkpoint()  # appended on a line of its own
    assert MapFile(path).map.runs == [(0, 0, 3), (5, 3, 2)]
