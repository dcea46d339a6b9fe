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
        runs = []  # (millisecond, first sequence number, how many)
        remaining = count
        while remaining:
            if seq > 0xFFF:  # the 12-bit sequence is used up: borrow the next millisecond
                ms, seq = ms + 1, 0
            take = min(remaining, 0x1000 - seq)
            runs.append((ms, seq, take))
            seq += take
            remaining -= take
        _last_ms, _counter = ms, seq
    # 8 random bytes per id; the first gets the RFC 4122 variant bits (10xx).
    tail = bytearray(os.urandom(8 * count))
    tail[0::8] = tail[0::8].translate(_VARIANT)
    hexed = tail.hex()
    out = []
    r = 0
    for ms, first, take in runs:
        head = f"{ms:012x}"
        prefix = f"{head[:8]}-{head[8:]}-7"
        for seq in range(first, first + take):
            out.append(f"{prefix}{_SEQ[seq]}{hexed[r : r + 4]}-{hexed[r + 4 : r + 16]}")
            r += 16
    return out


_VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))
_SEQ = [f"{seq:03x}-" for seq in range(0x1000)]


def new_id() -> str:
    return new_ids(1)[0]
