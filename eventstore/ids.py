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
    for i, (ms, seq) in enumerate(stamps):
        head = f"{ms:012x}"
        rand = tail[16 * i : 16 * i + 16]
        variant = "89ab"[int(rand[0], 16) & 3]
        out.append(f"{head[:8]}-{head[8:]}-7{seq:03x}-{variant}{rand[1:4]}-{rand[4:16]}")
    return out


def new_id() -> str:
    return new_ids(1)[0]
