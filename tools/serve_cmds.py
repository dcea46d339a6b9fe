"""``mnemolog serve`` and ``mnemolog keys``: the API server and its keys."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import ipaddress
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Mapping

from mnemolog.api.auth import SCOPES, KeyStore, is_shared
from mnemolog.eventstore.settings import Settings

from .common import CommandError, add_command, data_dir, existing_database, listening_socket, port_arg, key_tenant_name


def _settings(args: argparse.Namespace, **overrides) -> Settings:
    values = {"data_dir": str(data_dir(args))}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(values)


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    return f"http://{host if ':' not in host else f'[{host}]'}:{port}"


def first_start_key(keystore: KeyStore, host: str, port: int) -> str | None:
    """At first start (no keys yet) create a local development key and say how to use it."""
    if keystore.count_active() or keystore.list():
        return None
    secret, _ = keystore.create("default", ["read", "write", "admin"], name="local development key (first start)")
    url = url_of(host, port)
    print(
        f"""mnemolog: created a local development key for tenant 'default' (shown once):

    {secret}

Try it:
    curl -s -X POST {url}/v1/memories -H 'Authorization: Bearer {secret}' \\
         -H 'Content-Type: application/json' -d '{{"memory": {{"memory": "I moved to Lisbon in May", "key": "home city"}}}}'
    curl -s -X POST {url}/v1/recall -H 'Authorization: Bearer {secret}' \\
         -H 'Content-Type: application/json' -d '{{"query": "which city did I move to?"}}'

Or browse it at {url}/explorer (sign in with the key).
""",
        flush=True,
    )
    return secret


def _open_log(settings: Settings) -> None:
    """Open the log once (a new one made, an older one migrated, as the app would) before anything is announced
    or made: one it cannot open (a newer mnemolog's, not a database) stops ``serve`` as one line, not after its
    banner, a first-start key shown for a server that never ran, and alembic's log lines."""
    from mnemolog.eventstore import EventStore

    EventStore.open(settings=settings).close()


#: The ``MNEMOLOG_*`` variables read that are no setting: the CLI's tenant, the MCP server's key.
OTHER_VARIABLES = frozenset({"MNEMOLOG_TENANT", "MNEMOLOG_API_KEY"})


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A line for each ``MNEMOLOG_*`` variable of the environment that names no setting (once the server's modules
    declared theirs), with the setting it may be a misspelling of: such a variable is ignored, and a typo in a
    setting's name left its default in force without a word."""
    from mnemolog.eventstore.settings import REGISTRY

    known = {f"MNEMOLOG_{name.upper()}" for name in REGISTRY} | OTHER_VARIABLES
    lines = []
    for name in sorted(n for n in (os.environ if environ is None else environ) if n.startswith("MNEMOLOG_") and n not in known):
        near = difflib.get_close_matches(name.removeprefix("MNEMOLOG_"), sorted(k.removeprefix("MNEMOLOG_") for k in known), n=1, cutoff=0.75)
        lines.append(f"{name} names no setting and is ignored" + (f" (did you mean MNEMOLOG_{near[0]}?)" if near else ""))
    return lines


def run_steadily(app, **options) -> None:
    """Serve ``app`` (aiohttp's ``run_app`` with ``options``), the first SIGTERM stopping it gracefully and later
    ones ignored. A service manager signals every process of the server at once (systemd's default), and the
    supervisor passes the signal on to its workers, which got it already. aiohttp's own handler raised its stop
    once per signal: the second, raised inside the graceful shutdown (saving the vector index, closing the
    databases), or queued beside the first while a worker was busy opening its data directory, escaped, and the
    worker exited 1. Ctrl-C stops it as Python's KeyboardInterrupt does (twice: at once)."""
    from aiohttp import web
    from aiohttp.web_runner import GracefulExit

    loop = asyncio.new_event_loop()
    stopping: list[bool] = []

    def stop() -> None:
        if not stopping:
            stopping.append(True)
            raise GracefulExit()

    loop.add_signal_handler(signal.SIGTERM, stop)
    web.run_app(app, loop=loop, handle_signals=False, **options)


def serve(args: argparse.Namespace) -> int:
    from mnemolog.api.app import create_app
    from mnemolog.api.background import default_background
    from mnemolog.projections.policies.settings import check_settings as check_organizer_settings
    from mnemolog.projections.vectors.embedders import configured_embedder

    settings = _settings(args, host=args.host, port=args.port)
    host, port = settings.host, int(settings.port)
    worker = getattr(args, "worker", None)
    if worker is not None:  # one of serve_workers' processes
        logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s %(name)s[{worker}]: %(message)s")
        background = default_background(settings, runs_organizer=worker == 0)
        run_steadily(create_app(settings, background=background), host=host, port=port, reuse_port=True, print=None, access_log=None)
        return 0
    if not settings.auth and not is_loopback(host):
        raise CommandError(f"refusing to bind {host} without auth: set MNEMOLOG_AUTH=on or bind 127.0.0.1")
    workers = int(settings.workers)
    from mnemolog.projections.service import backups_keep

    backups_keep(settings)  # a drop must keep its backup: refuse to start rather than fail on the first drop
    if workers > 1 and port == 0:
        raise CommandError("several workers need a fixed port (MNEMOLOG_PORT or --port)")
    configured_embedder(settings)  # bad setup (a missing extra) stops here, as one line, before anything is made
    check_organizer_settings(settings)  # so does a judge's bad URL or timeout, not the organizer's start after the banner
    sock = listening_socket(host, port)  # a port in use stops here, as one line
    if workers > 1:
        sock.close()  # the supervisor's workers bind their own (reuse_port); this was the check
        sock = None
    if sock is not None:
        port = sock.getsockname()[1]
    try:
        _open_log(settings)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for line in unknown_variables():
        print(f"mnemolog: warning: {line}", file=sys.stderr, flush=True)
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    if settings.auth:
        keystore = KeyStore.of(settings)
        try:
            first_start_key(keystore, host, port)
        finally:
            keystore.close()
    where = f"{Path(settings.data_dir).resolve()} on {url_of(host, port)}"
    if sock is not None:
        print(f"mnemolog: serving {where} (Ctrl-C stops)", flush=True)
        run_steadily(create_app(settings, background=default_background(settings)), sock=sock, print=None, access_log=None)
        return 0
    print(f"mnemolog: serving {where} with {workers} worker processes (Ctrl-C stops)", flush=True)
    # The supervisor holds no data and needs none of the libraries loaded here:
    # it becomes a small process of its own (same pid, so signals reach it).
    os.execv(sys.executable, [sys.executable, "-m", "mnemolog.tools.supervisor", str(settings.data_dir), host, str(port), str(workers)])
    return 0  # not reached


def keys_create(args: argparse.Namespace) -> int:
    if not args.tenant:
        raise CommandError("name the tenant the key acts for with --tenant ('*' for any)")
    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    store = KeyStore.of(Settings({"data_dir": str(data_dir(args))}))
    try:
        secret, record = store.create(args.tenant, scopes, args.name or "")
    finally:
        store.close()
    if args.json:
        print(json.dumps({"key": secret, "key_id": record.key_id, "tenant": record.tenant, "scopes": list(record.scopes)}))
    else:
        print(f"created key {record.key_id} for tenant {record.tenant!r} with scopes {','.join(record.scopes)} (shown once):")
        print(secret)
    return 0


def _existing_keys(args: argparse.Namespace) -> KeyStore:
    """The API keys of the data directory (of the PostgreSQL log, shared), for a command that reads or changes them:
    a data directory with no key store (a mistyped ``--data-dir``, or keys never made there) is refused, not given
    a new, empty one."""
    settings = Settings({"data_dir": str(data_dir(args))})
    if not is_shared(settings):
        path = data_dir(args) / "auth.db"
        existing_database(path, f"no API keys at {path} (mnemolog keys create makes the first): check --data-dir or MNEMOLOG_DATA_DIR")
    return KeyStore.of(settings)


def keys_list(args: argparse.Namespace) -> int:
    store = _existing_keys(args)
    try:
        records = store.list()
    finally:
        store.close()
    for r in records:
        state = "revoked" if r.revoked_at else "active"
        if args.json:
            print(json.dumps({"key_id": r.key_id, "tenant": r.tenant, "scopes": list(r.scopes), "name": r.name, "state": state}))
        else:
            print(f"{r.key_id}  {state:8}  {r.tenant:20}  {','.join(r.scopes):17}  {r.name}")
    return 0


def keys_revoke(args: argparse.Namespace) -> int:
    store = _existing_keys(args)
    try:
        done = store.revoke(args.key_id)
    finally:
        store.close()
    if not done:
        raise CommandError(f"no active key {args.key_id!r}")
    print(f"revoked {args.key_id}")
    return 0


def register(subparsers) -> None:
    parser = add_command(subparsers, "serve", serve, help="run the API server on this data directory")
    parser.add_argument("--host", help="address to bind (default $MNEMOLOG_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=port_arg, help="port (default $MNEMOLOG_PORT or 8765; 0 picks a free one, with one worker)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # set by serve_workers for its processes
    keys = subparsers.add_parser("keys", help="manage API keys (hashed at rest)")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = add_command(keys_sub, "create", keys_create, help="create a key (shown once)", json=True)
    create.add_argument("--tenant", type=key_tenant_name, help="tenant the key acts for ('*' for any, chosen per request); required")
    create.add_argument("--scopes", default="read,write", help=f"comma-separated among {','.join(SCOPES)} (default read,write)")
    create.add_argument("--name", help="a label for the key")
    add_command(keys_sub, "list", keys_list, help="list keys (never their secrets)", json=True)
    revoke = add_command(keys_sub, "revoke", keys_revoke, help="revoke a key")
    revoke.add_argument("key_id")
