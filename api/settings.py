"""The API server's settings (``MEMLEDGER_<NAME>`` in the environment)."""

import os

from eventstore.settings import setting

HOST = setting("host", "127.0.0.1", "Address the API server binds; a non-loopback address requires auth.")
PORT = setting("port", 8765, "Port of the API server.")
AUTH = setting("auth", True, "Require API keys. Turning it off is allowed on loopback addresses only.")
MAX_BODY_BYTES = setting("max_body_bytes", 16 * 1024 * 1024, "Largest request body accepted (413 beyond).")
READ_THREADS = setting(
    "read_threads",
    min(os.cpu_count() or 2, 8),
    "Threads serving reads (the writer is always one thread). Default: one per core, at most 8;"
    " SQLite runs them in parallel, while more threads than cores only contend for Python's lock.",
)
