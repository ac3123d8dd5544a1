"""``rocketq dashboard -n NAMESRV [--port N] [--host 127.0.0.1]``: the web console.

Prints ``READY dashboard=http://HOST:PORT`` once it serves, then runs until SIGINT / SIGTERM.
It binds 127.0.0.1 unless ``--host`` says otherwise: the dashboard sends messages and moves
offsets, and has no login of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import os
import signal
import sys
from typing import Any, TextIO

from rocketq.cli.credentials import session_credentials
from rocketq.cli.errors import CliError, UsageError

__all__ = ["add_command", "run_dashboard"]

log = logging.getLogger("rocketq.cli.dashboard")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


def add_command(commands: Any) -> None:
    """Add ``dashboard`` to the ``rocketq`` sub-command parser."""
    p = commands.add_parser("dashboard", help="web console: cluster, topics, groups, messages",
                            description="Serve the rocketq web dashboard over the admin API.")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR", default=os.environ.get("NAMESRV_ADDR"),
                   help="name server list 'host:port;host:port' (default: $NAMESRV_ADDR)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, help="port to bind, 0 for a free one (default: 8080)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="timeout of each admin request (default: 5)")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log level on stderr (default: INFO)")
    p.add_argument("--users", metavar="FILE",
                   help="require a sign-in: users, password hashes and roles (admin, read-only) in "
                        "this YAML file (docs/dashboard.md)")
    p.add_argument("--acl-users", action="store_true",
                   help="require a sign-in with the brokers' ACL 2.0 users: Super users may change, "
                        "Normal users only read (docs/dashboard.md)")
    p.add_argument("--hash-password", action="store_true",
                   help="read a password from the terminal, print its hash for --users, and exit")
    p.add_argument("--access-key", metavar="AK",
                   help="the ACL account the dashboard acts as (default: env ROCKETQ_ACCESS_KEY)")
    p.add_argument("--secret-key", metavar="SK", help="its secret (default: env ROCKETQ_SECRET_KEY)")
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if args.hash_password:
        from rocketq.dashboard.auth import hash_password

        password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
        if not password:
            raise UsageError("an empty password")
        print(hash_password(password))
        return 0
    if not args.namesrv_addr:
        raise UsageError("no name server given: use -n host:port or set NAMESRV_ADDR")
    if args.users and args.acl_users:
        raise UsageError("--users and --acl-users: sign in with one of them, not both")
    from rocketq.remoting.loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(run_dashboard(args.namesrv_addr, args.host, args.port, args.timeout, sys.stdout,
                                        users=_users(args.users), acl_users=args.acl_users,
                                        credentials=session_credentials(args.access_key, args.secret_key)))


def _users(path: str | None) -> Any:
    if not path:
        return None
    from rocketq.dashboard.auth import load_users

    return load_users(path)


async def run_dashboard(namesrv: str, host: str, port: int, timeout: float, out: TextIO, *,
                        users: Any = None, credentials: Any = None, acl_users: bool = False) -> int:
    """Serve until a signal, announcing READY on ``out``."""
    try:
        from rocketq.dashboard import start_dashboard
    except ImportError as exc:  # aiohttp is the 'dashboard' extra
        raise CliError(f"the dashboard needs aiohttp ({exc}): pip install 'rocketq[dashboard]'") from None

    try:
        server = await start_dashboard(namesrv, host, port, timeout=timeout, users=users,
                                       credentials=credentials, acl_users=acl_users)
    except OSError as exc:
        raise CliError(f"the dashboard failed to start on {host}:{port}: {exc.strerror or exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        line = f"READY dashboard={server.url}"
        try:
            out.write(line + "\n")
            out.flush()
        except (BrokenPipeError, ValueError):
            log.debug("stdout is closed; READY line not delivered")
        log.debug("%s", line)  # at INFO a terminal would show it twice (stdout and the stderr log)
        await stop.wait()
        log.info("dashboard shutting down")
    finally:
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return 0
