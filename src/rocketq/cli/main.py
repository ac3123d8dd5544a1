"""Entry point of the ``rocketq`` console script.

Every failure the user can cause ends as ONE line on stderr and an exit code: 2 for a bad command
line or configuration (nothing was started), 1 for a failure at runtime. Tracebacks are only
logged at DEBUG (``--log-level DEBUG``).
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

import rocketq
from rocketq.cli import admin, bench, controller, dashboard, serve
from rocketq.cli.errors import CliError, UsageError
from rocketq.errors import ConfigError

log = logging.getLogger("rocketq.cli")

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s - %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# 128 + SIGPIPE: what a shell reports for a command its reader stopped reading.
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """argparse prints the whole usage before an error; one line is easier to read and to grep."""

    def error(self, message: str) -> NoReturn:
        hint = self._suggestion(message)
        raise UsageError(f"{message}{hint} (see '{self.prog} --help')")

    def _suggestion(self, message: str) -> str:
        """``; did you mean topicList?`` for a mistyped command (case and small typos forgiven)."""
        m = re.search(r"invalid choice: '([^']*)'", message)
        if m is None:
            return ""
        choices = [str(c) for a in self._actions if isinstance(a, argparse._SubParsersAction)
                   for c in a.choices]
        by_lower = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(m.group(1).lower(), list(by_lower), n=1, cutoff=0.6)
        return f"; did you mean {by_lower[close[0]]}?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocketq",
        description="Apache RocketMQ rebuilt in Python: name server, broker and tools.",
    )
    parser.add_argument("--version", action="version", version=f"rocketq {rocketq.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve.add_commands(commands)
    bench.add_commands(commands)
    admin.add_command(commands)
    dashboard.add_command(commands)
    controller.add_command(commands)
    return parser


def _configure_logging(level: str) -> None:
    # Our own handler on the "rocketq" logger, replaced on every call, so that calling main() more
    # than once (tests) neither duplicates lines nor touches the application's root logger.
    logger = logging.getLogger("rocketq")
    for handler in [h for h in logger.handlers if getattr(h, "_rocketq_cli", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler._rocketq_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def _error_line(message: str) -> None:
    text = " ".join(message.split())  # one line, whatever the message contains
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(f"[bold red]rocketq: error:[/] {escape(text)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]) and return the exit code."""
    try:
        args = build_parser().parse_args(argv)
        _configure_logging(args.log_level)
        code: int = args.handler(args)
        return code
    except UsageError as exc:
        _error_line(str(exc))
        return 2
    except ConfigError as exc:
        _error_line(str(exc))
        return 2
    except CliError as exc:
        _error_line(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`rocketq admin topicList | head`): stop quietly, as `cat` would.
        # stdout is pointed at /dev/null so the interpreter's final flush cannot complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # never a traceback on the console; DEBUG logs it
        log.debug("unexpected error", exc_info=True)
        _error_line(f"unexpected {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
