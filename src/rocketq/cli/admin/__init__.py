"""``rocketq admin <command>``: RocketMQ's mqadmin, with its command names and option letters.

Every command takes ``-n/--namesrvAddr`` (default: env NAMESRV_ADDR), ``--json`` (machine-readable
output on stdout) and ``--timeout`` (seconds per request). Humans get rich tables. A failure is one
line on stderr and exit code 1 (2 for a bad command line); never a traceback.

The commands live in one module per family (topic, group, message, cluster, namesrv); each module's
``register(add)`` declares its commands and their options.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson
from rich.console import Console

from rocketq.cli.admin import acl, cluster, group, maintenance, message, namesrv, queue, timer, topic, trace
from rocketq.cli.admin import controller as controller_commands
from rocketq.cli.admin._common import Handler, Result
from rocketq.cli.credentials import session_credentials
from rocketq.cli.errors import CliError, UsageError
from rocketq.errors import (
    ConfigError,
    InvalidArgument,
    InvalidParameter,
    NoNameServer,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RocketQError,
)

__all__ = ["add_command", "run"]

FAMILIES = (topic, group, message, queue, cluster, maintenance, namesrv, trace, acl, timer,
            controller_commands)
DEFAULT_TIMEOUT = 5.0
# Wide enough for offset tables when stdout is a pipe or a file (rich would assume 80 columns).
PIPE_WIDTH = 200


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("the timeout must be > 0 seconds")
    return value


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv_addr",
        metavar="ADDR",
        help="name server address list, 'host:port;host:port' (default: env NAMESRV_ADDR)",
    )
    common.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    common.add_argument(
        "--timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"timeout of each request (default {DEFAULT_TIMEOUT:g})",
    )
    # ACL and TLS (docs/security.md). The secret is better given by the environment than on a
    # command line other users of the machine can read.
    common.add_argument("--access-key", dest="acl_access_key", metavar="AK",
                        help="sign every request with this ACL account (default: env ROCKETQ_ACCESS_KEY)")
    common.add_argument("--secret-key", dest="acl_secret_key", metavar="SK",
                        help="the account's secret (default: env ROCKETQ_SECRET_KEY)")
    common.add_argument("--tls", action="store_true", help="connect over TLS")
    common.add_argument("--tls-ca-file", dest="tls_ca_file", metavar="PEM",
                        help="CA certificates that sign the servers' (default: the system's)")
    common.add_argument(
        "--log-level",
        default="ERROR",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="client log level on stderr (default ERROR: a failure is reported in one line)",
    )
    return common


def add_command(commands: Any) -> None:
    """Register ``admin`` (and its mqadmin sub-commands) on the ``rocketq`` sub-command parser."""
    parser = commands.add_parser(
        "admin",
        help="cluster administration: mqadmin's commands (rocketq admin --help lists them)",
        description="RocketMQ's mqadmin commands: topics, groups, messages, brokers, name servers.",
    )
    parser.set_defaults(handler=_missing_command, log_level="ERROR")
    sub = parser.add_subparsers(dest="admin_command", metavar="COMMAND")
    common = _common_options()

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=[common]
        )
        p.set_defaults(handler=run, admin_handler=handler)
        return p

    for family in FAMILIES:
        family.register(add)


def _missing_command(args: argparse.Namespace) -> int:
    raise UsageError("admin: a command is required (see 'rocketq admin --help')")


def run(args: argparse.Namespace) -> int:
    """Run one admin command: one AdminClient for its duration, the result printed, errors one line."""
    from rocketq.admin import AdminClient
    from rocketq.client import _sync

    handler: Handler = args.admin_handler
    name = args.admin_command
    namesrv_addr = args.namesrv_addr or os.environ.get("NAMESRV_ADDR")
    # the controller commands talk to the controllers (-a) and need no name server for that
    namesrv_addr = namesrv_addr or getattr(args, "controller_addr", None)

    credentials = session_credentials(args.acl_access_key, args.acl_secret_key)

    async def go() -> Result:
        async with AdminClient(namesrv_addr, timeout=args.timeout, credentials=credentials,
                               tls=args.tls, tls_ca_file=args.tls_ca_file) as admin:
            return await handler(admin, args)

    try:
        # No overall deadline: each request has its own, and `clusterList -i` runs until Ctrl-C.
        result = _sync.run_sync(go())
    except CliError:
        raise
    except NoNameServer as exc:
        raise UsageError(f"{name}: {exc}") from None
    except (InvalidArgument, InvalidParameter, ConfigError) as exc:
        # A value the client or a server refused is a bad command line, as documented (exit 2).
        raise UsageError(f"{name}: {exc}") from None
    except RocketQError as exc:
        raise CliError(f"{name}: {describe(exc)}") from None
    except TimeoutError:
        raise CliError(f"{name}: no answer within {args.timeout:g} s per request") from None
    emit(result, as_json=args.json)
    return result.exit_code


def describe(exc: RocketQError) -> str:
    """One line saying what failed, readable without knowing the error classes."""
    text = " ".join(str(exc).split())
    if isinstance(exc, RemotingConnectError):
        return f"cannot connect: {text} (is the cluster running and -n/NAMESRV_ADDR right?)"
    if isinstance(exc, RemotingTimeoutError):
        return f"timed out: {text}"
    if isinstance(exc, RemotingError):
        return f"connection failed: {text}"
    return text or type(exc).__name__


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich exits 1 here; let the entry point end it as every other broken pipe (quietly, 141).
        self.quiet = True
        raise BrokenPipeError


def emit(result: Result, *, as_json: bool) -> None:
    if as_json:
        data = orjson.dumps(result.data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str)
        sys.stdout.write(data.decode() + "\n")
        sys.stdout.flush()
        return
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    console = _Console(width=width, highlight=False, emoji=False, markup=False, soft_wrap=False)
    for view in result.views:
        console.print(view)
