"""The API server's settings (``MNEMOLOG_<NAME>`` in the environment)."""

import os

from mnemolog.eventstore.settings import setting

HOST = setting("host", "127.0.0.1", "Address the API server binds; a non-loopback address requires auth.")
PORT = setting("port", 8765, "Port of the API server.", minimum=0, maximum=65535)
AUTH = setting("auth", True, "Require API keys. Turning it off is allowed on loopback addresses only.")
MAX_BODY_BYTES = setting("max_body_bytes", 16 * 1024 * 1024, "Largest request body accepted (413 beyond).", minimum=1)
READ_THREADS = setting(
    "read_threads",
    0,
    "Threads serving reads in each server process (the writer is always one thread). 0: the cores divided"
    " among the workers, at least one; SQLite runs them in parallel, more threads than cores only contend"
    " for Python's lock.",
    minimum=0,
)


def read_threads(settings) -> int:
    """The reader pool's size for ``settings`` (see READ_THREADS)."""
    chosen = int(settings.read_threads)
    if chosen > 0:
        return chosen
    return max(1, (os.cpu_count() or 2) // max(1, int(settings.workers)))


WORKERS = setting(
    "workers",
    1,
    "Server processes sharing the port (SO_REUSEPORT). Each holds its own caches and vector index;"
    " they share the data directory. More than one serves more reads per second on several cores.",
    minimum=1,
)
