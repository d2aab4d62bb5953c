"""The lag and detail a leader carries to the group's coordinator in ReadShareGroupStateSummary's
success error_message (`--processes N`): read back as written, and nothing worse than unknown
values from a message that is not ours."""

from __future__ import annotations

from broker.share.share_group_offsets import PartitionOffsets


def test_a_summary_reads_back_as_the_leader_described_it() -> None:
    described = PartitionOffsets(120, 131, lag=7, available=3, acquired=2, acknowledged=4,
                                 archived=1, control=2, archiving=0, delayed=1)  # fmt: skip
    assert PartitionOffsets.from_summary(120, described.summary()) == described
    # What the coordinator then answers the client is what it answers for its own partitions.
    assert PartitionOffsets.from_summary(120, described.summary()).extension() == (
        described.extension()
    )


def test_a_share_partition_never_started_is_minus_one_whatever_the_message() -> None:
    assert PartitionOffsets.from_summary(-1, "lag=5 speo=9") == PartitionOffsets(-1)


def test_a_message_that_is_not_a_summary_leaves_lag_and_end_unknown() -> None:
    for message in (None, "", "lag=x speo= acquired=-", "garbage words"):
        read = PartitionOffsets.from_summary(10, message)
        assert (read.start_offset, read.lag, read.end_offset, read.acquired) == (10, -1, -1, 0)
