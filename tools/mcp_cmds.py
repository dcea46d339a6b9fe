"""``mnemolog mcp``: the MCP server, over stdio (for desktop agents) or streamable HTTP on loopback.

The server itself is :mod:`mnemolog.api.mcp_server`; it needs the optional
``mcp`` extra, and without it this command exits 2 saying how to install it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from mnemolog.api.auth import check_tenant
from mnemolog.api.api_error import ApiError
from mnemolog.eventstore.settings import Settings

from .common import CommandError, add_command, data_dir, listening_socket, port_arg, tenant_name
from .serve_cmds import is_loopback

API_KEY_ENV = "MNEMOLOG_API_KEY"
DEFAULT_PORT = 8766
DEFAULT_HOST = "127.0.0.1"


def mcp(args: argparse.Namespace) -> int:
    # The server's modules (aiohttp with them) load for this command alone: every other command starts without them.
    from mnemolog.api.mcp_server import INSTALL_HINT, McpFront, McpUnavailable, client_config, require_sdk, run_http, run_stdio
    from mnemolog.projections.vectors.embedders import configured_embedder

    if args.print_config:
        # The entry launches the server over stdio, and holds no secret: what it cannot carry is refused, not dropped.
        given = [o for o, on in (("--http", args.http), ("--host", args.host != DEFAULT_HOST), ("--port", args.port != DEFAULT_PORT), ("--api-key", args.api_key)) if on]
        if given:
            raise CommandError(
                f"--print-config prints the entry that launches the server over stdio, which takes no {', '.join(given)}:"
                f" an HTTP client connects to http://HOST:PORT/mcp, and the key goes in the entry's env ({API_KEY_ENV})"
            )
        config = client_config(str(data_dir(args).resolve()), command=_command_path(), allow_writes=args.allow_writes, tenant=args.tenant)
        print(json.dumps(config, indent=2))
        return 0
    try:
        require_sdk()
    except McpUnavailable:
        raise CommandError(f"mnemolog mcp needs the optional mcp package: {INSTALL_HINT}") from None

    settings = Settings({"data_dir": str(data_dir(args))})
    api_key = args.api_key or os.environ.get(API_KEY_ENV, "")
    if settings.auth and not api_key and not args.http:
        raise CommandError(f"name the API key the server acts as: set {API_KEY_ENV} or pass --api-key (create one with mnemolog keys create)")
    try:
        check_tenant(args.tenant or "", "--tenant")
    except ApiError as error:
        raise CommandError(error.message) from None
    if args.http and not is_loopback(args.host):
        raise CommandError(f"mnemolog mcp --http serves loopback only, not {args.host}: use 127.0.0.1, ::1 or localhost")
    configured_embedder(settings)  # a missing extra stops here, as one line
    sock = listening_socket(args.host, args.port) if args.http else None  # a port in use, too
    front = McpFront.open(settings, api_key=api_key, tenant=args.tenant, allow_writes=args.allow_writes, inline_reads=not args.http)
    try:
        if args.http:
            run_http(front, args.host, args.port, sock=sock, ready=lambda url: print(f"mnemolog: MCP over streamable HTTP at {url} (Ctrl-C stops)", file=sys.stderr, flush=True))
        else:
            run_stdio(front)
    finally:
        front.close()
    return 0


def _command_path() -> str:
    """This ``mnemolog`` executable's absolute path, for a client that launches it without a PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mnemolog")
    return here if os.path.exists(here) else "mnemolog"


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "mcp",
        mcp,
        help="serve memory to MCP clients: stdio by default, --http for streamable HTTP on loopback (needs the mcp extra)",
    )
    parser.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="the tenant a key for every tenant ('*') acts for, or with MNEMOLOG_AUTH off (default: default); the server's own key of one tenant must be of this one")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"loopback address for --http (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=port_arg, default=DEFAULT_PORT, help=f"port for --http (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--api-key", help=f"the API key to act as (default ${API_KEY_ENV}); over HTTP a request's Authorization: Bearer key wins")
    parser.add_argument("--allow-writes", action="store_true", help="offer the write tools (add_memory, update_memory, archive_memory, link, revert) to a key with the write scope")
    parser.add_argument("--print-config", action="store_true", help="print the mcpServers entry an MCP client needs to launch this server, and exit")
