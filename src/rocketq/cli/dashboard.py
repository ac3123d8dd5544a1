"""``rocketq dashboard -n NAMESRV [--port N] [--host 127.0.0.1]``: the web console.

Prints ``READY dashboard=http://HOST:PORT`` once it serves, then runs until SIGINT / SIGTERM.
It binds 127.0.0.1 unless ``--host`` says otherwise: the dashboard sends messages and moves
offsets, and has no login of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any, TextIO

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
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not args.namesrv_addr:
        raise UsageError("no name server given: use -n host:port or set NAMESRV_ADDR")
    from rocketq.remoting.loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(run_dashboard(args.namesrv_addr, args.host, args.port, args.timeout, sys.stdout))


async def run_dashboard(namesrv: str, host: str, port: int, timeout: float, out: TextIO) -> int:
    """Serve until a signal, announcing READY on ``out``."""
    try:
        from rocketq.dashboard import start_dashboard
    except ImportError as exc:  # aiohttp is the 'dashboard' extra
        raise CliError(f"the dashboard needs aiohttp ({exc}): pip install 'rocketq[dashboard]'") from None

    try:
        server = await start_dashboard(namesrv, host, port, timeout=timeout)
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
