"""share.key.ordering.enable=true (seed 001): records of one key are never in flight at two
members, and never out of order.

A record with a key is acquired only if no record of its key is ACQUIRED, nor AVAILABLE at a
lower offset, and only by the member whose slice of the hash space holds the key, among the
members that fetched within `AFFINITY_IDLE_MS`; records with a null key go to anyone. At most
MaxRecords, batch boundaries or not.

The one acquisition that reads records: `broker/share/key_hashes.py` decodes the batches for
such groups only, and this policy remembers the hash of every key of its window, so a batch is
decoded once. It keeps its state across fetches (one per share-partition) and watches the
window to free a key when its record leaves ACQUIRED.
"""

from __future__ import annotations

from broker.share.acquire.policy import Fetch
from broker.share.acquire.policy import KeyHashes
from broker.share.window import AVAILABLE
from broker.share.window import AcquiredRecords
from broker.share.window import ShareWindow

# A member that has not fetched a key-ordered share-partition for this long no longer owns a
# hash range there, so its keys go to the members still fetching.
AFFINITY_IDLE_MS = 5_000


class KeyOrdered:
    """The key rule over one share-partition's window."""

    __slots__ = ("_fetched_at", "_held", "_key_at", "_keys", "_keys_from", "_watching")

    def __init__(self, start_offset: int) -> None:
        # The key hash of every record acquired under the key rule, by offset and by key (at
        # most one acquired record per key), and when each member last fetched.
        self._key_at: dict[int, int] = {}
        self._held: dict[int, int] = {}  # key -> records of it ACQUIRED
        self._fetched_at: dict[str, int] = {}
        # Key hashes of offsets [_keys_from, _keys_from + len(_keys)) of the window, so a fetch
        # decodes only batches it has not seen (the window is scanned again at every fetch).
        self._keys: list[int | None] = []
        self._keys_from = start_offset
        self._watching = False

    def reset(self, start_offset: int) -> None:
        """The window was dropped and starts at `start_offset`: no key held, none known."""
        self._key_at.clear()
        self._held.clear()
        self._keys, self._keys_from = [], start_offset

    def forget_member(self, member_id: str) -> None:
        """The member left the group: its hash range goes to the others at once."""
        self._fetched_at.pop(member_id, None)

    def keys_wanted(self, start: int, hi: int) -> tuple[int, int]:
        """For a fetch from `start`: the keys it needs from `lo` on (`start`, or past the
        keys remembered if they reach it), and `hi` (where the window may grow to)."""
        known_end = self._keys_from + len(self._keys)
        lo = known_end if self._keys_from <= start <= known_end else start
        return (lo, hi)

    def acquire(self, window: ShareWindow, fetch: Fetch) -> list[AcquiredRecords]:
        """The spans first join the window whole (AVAILABLE, within `max_record_locks`);
        then the window is scanned from the cursor, its first AVAILABLE offset, in offset
        order, so every AVAILABLE record below the one considered has been seen: a key seen
        and not taken blocks the rest of its records for this fetch. `fetch.keys` holds the
        keys from `keys_wanted()`'s low end on, and the spans go no further than its high end."""
        assert fetch.keys is not None, "a key-ordered fetch comes with its keys"
        if not self._watching:
            window.watch(self._unhold)
            self._watching = True
        self._fetched_at[fetch.member_id] = fetch.now_ms
        start = fetch.cursor
        end = self._join(window, fetch)
        self._remember_keys(window, fetch.keys, start, end)
        start = max(start, window.start)
        if start >= end or not window.available:
            return []
        owners = self._owners(fetch.now_ms)
        picked = self._pick(
            window, fetch.member_id, start, end, owners, fetch.max_records, fetch.now_ms,
            fetch.per_key,
        )  # fmt: skip
        return self._take(window, fetch.member_id, picked, fetch.deadline, fetch.now_ms)

    def _join(self, window: ShareWindow, fetch: Fetch) -> int:
        """Bring the spans into the window (gaps and control batches archived, new data
        AVAILABLE, within `max_record_locks`); the end of the offsets whose keys they give."""
        end = fetch.cursor
        added_new = False
        for lo, last in window.walk(fetch.spans, fetch.cursor, fetch.committed):
            if last >= window.end:
                if not window.may_extend(last, added_new, fetch.max_record_locks):
                    break
                added_new = True
                window.extend(max(lo, window.end), last)
            end = last + 1
        return end

    def _remember_keys(self, window: ShareWindow, keys: KeyHashes, start: int, end: int) -> None:
        """Add the keys of [known end, end) from `keys` (what `keys_wanted` asked for);
        forget those below SPSO. One entry per offset of the window, no more."""
        known_end = self._keys_from + len(self._keys)
        if not self._keys_from <= start <= known_end:
            self._keys, self._keys_from, known_end = [], start, start
        below = min(window.start, start) - self._keys_from
        if below > 0:
            del self._keys[:below]
            self._keys_from += below
        self._keys.extend(keys.get(o) for o in range(known_end, end))

    def _pick(
        self,
        window: ShareWindow,
        member_id: str,
        start: int,
        end: int,
        owners: list[str],
        max_records: int,
        now_ms: int,
        per_key: int = 1,
    ) -> list[tuple[int, int | None]]:
        """The AVAILABLE offsets of [start, end) the key rule gives `member_id`, in order, at
        most `per_key` of a key in flight (`share.key.ordering.max.in.flight.per.key`). A
        record that waits (retry backoff, a schedule) is not picked and holds its key's later
        records back, as a key at its limit does: key order outlasts the wait."""
        in_flight = dict(self._held)
        blocked = {k for k, n in in_flight.items() if n >= per_key}
        keys, base = self._keys, self._keys_from
        picked: list[tuple[int, int | None]] = []
        for b in window.ranges_in(start, end - 1):
            if b.state is not AVAILABLE:
                continue
            if b.not_before > now_ms:
                blocked.update(self._keys_of(max(b.first, start), min(b.last + 1, end)))
                continue
            for offset in range(max(b.first, start), min(b.last + 1, end)):
                key = keys[offset - base]
                if key is not None:
                    if key in blocked:
                        continue
                    if owners[(key * len(owners)) >> 32] != member_id:
                        blocked.add(key)  # its later records wait for this one
                        continue
                    in_flight[key] = in_flight.get(key, 0) + 1
                    if in_flight[key] >= per_key:
                        blocked.add(key)  # its later records wait for these
                picked.append((offset, key))
                if len(picked) >= max_records:
                    return picked
        return picked

    def _keys_of(self, lo: int, hi: int) -> set[int]:
        """The (non-null) keys of offsets [lo, hi), as remembered."""
        keys, base = self._keys, self._keys_from
        return {k for k in keys[lo - base : hi - base] if k is not None}

    def _owners(self, now_ms: int) -> list[str]:
        """Members that fetched lately, sorted: member n owns the n-th slice of the hash
        space (seed 001's hash ranges), so a key stays with one member while the set holds."""
        for member, at in list(self._fetched_at.items()):
            if now_ms - at > AFFINITY_IDLE_MS:
                del self._fetched_at[member]
        return sorted(self._fetched_at)

    def _take(
        self,
        window: ShareWindow,
        member_id: str,
        picked: list[tuple[int, int | None]],
        deadline: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        """Acquire the picked AVAILABLE offsets (sorted), run by run."""
        out: list[AcquiredRecords] = []
        runs: list[list[int]] = []
        for offset, _ in picked:
            if runs and runs[-1][1] + 1 == offset:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset])
        for first, last in runs:
            window.acquire(first, last, member_id, deadline, out, now_ms=now_ms)
        for offset, key in picked:
            if key is not None:
                self._key_at[offset] = key
                self._held[key] = self._held.get(key, 0) + 1
        return out

    def _unhold(self, first: int, last: int) -> None:
        """Records [first, last] left ACQUIRED: their keys may be acquired again."""
        if not self._key_at:
            return
        if last - first + 1 <= len(self._key_at):
            gone = [o for o in range(first, last + 1) if o in self._key_at]
        else:
            gone = [o for o in self._key_at if first <= o <= last]
        for offset in gone:
            key = self._key_at.pop(offset)
            held = self._held.get(key, 0)
            if held > 1:
                self._held[key] = held - 1
            else:
                self._held.pop(key, None)
