"""Time-ordered identifiers (UUID version 7).

Event ids and memory ids sort by creation time, so that the log's unique
indexes grow at their right edge instead of taking random B-tree inserts.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_ids(count: int) -> list[str]:
    """``count`` distinct UUIDv7 strings, increasing within one call and across calls."""
    global _last_ms, _counter
    if count <= 0:
        return []
    with _lock:
        ms = max(time.time_ns() // 1_000_000, _last_ms)
        seq = _counter if ms == _last_ms else 0
        stamps = []
        for _ in range(count):
            if seq > 0xFFF:  # the 12-bit sequence is used up: borrow the next millisecond
                ms, seq = ms + 1, 0
            stamps.append((ms, seq))
            seq += 1
        _last_ms, _counter = ms, seq
    tail = os.urandom(8 * count).hex()
    out = []
    prefix_ms, prefix = -1, ""
    for i, (ms, seq) in enumerate(stamps):
        if ms != prefix_ms:
            head = f"{ms:012x}"
            prefix_ms, prefix = ms, f"{head[:8]}-{head[8:]}-7"
        r = 16 * i
        out.append(f"{prefix}{seq:03x}-{_VARIANT[tail[r]]}{tail[r + 1 : r + 4]}-{tail[r + 4 : r + 16]}")
    return out


# The RFC 4122 variant bits (10xx) on the first hex digit of the fourth group.
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def new_id() -> str:
    return new_ids(1)[0]
