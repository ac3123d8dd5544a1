"""``rocketq up | namesrv | broker``: run the servers in one process on one event loop.

Once every server of the command is serving, exactly one line goes to stdout (and is flushed):
``READY namesrv=HOST:PORT broker=HOST:PORT`` (only the servers the command runs). With
``metricsPort`` on, the line ends with `` metrics=HOST:PORT`` (the broker's endpoint, or the name
server's in ``rocketq namesrv``); in ``up`` a name server with its own ``namesrv.metricsPort``
adds ``namesrvMetrics=HOST:PORT`` before it. A broker serving RocketMQ 5 gRPC (``grpcPort``, on by
default; docs/grpc.md) ends the line with `` grpc=HOST:PORT``. SIGINT/SIGTERM stop the servers
gracefully, broker first (it unregisters from the name server and flushes its store), and the
process exits 0; a second signal abandons the shutdown (exit 1).

A broker holds an exclusive flock on ``<storePathRootDir>/broker.pid`` (which holds its PID) from
before it binds a port until the process exits, so a second broker on the same data directory
refuses at once with one line naming the first one's PID, exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import fcntl
import functools
import logging
import logging.handlers
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.table import Table

from rocketq.cli.argtypes import grpc_port, non_negative, port, positive
from rocketq.cli.assembly import (
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    ServeOptions,
    ServePlan,
    build_plan,
    replica_configs,
)
from rocketq.cli.errors import CliError
from rocketq.config import Update, config_fields, dump_properties

log = logging.getLogger("rocketq.cli")

SHUTDOWN_TIMEOUT = 60.0  # per server: a broker flushing a large dirty page cache needs a while
PID_FILE_NAME = "broker.pid"
LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s - %(message)s"
DEFAULT_LOG_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_LOG_BACKUPS = 10


class Controller(Protocol):
    """What the CLI needs of NamesrvController and BrokerController."""

    @property
    def address(self) -> str: ...

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Arguments.


def add_commands(commands: Any) -> None:
    """Add up / namesrv / broker to the ``rocketq`` sub-command parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", metavar="FILE", dest="config_file",
        help="a RocketMQ .properties file (broker.conf) or a .toml file",
    )
    common.add_argument(
        "--set", metavar="KEY=VALUE", dest="sets", action="append", default=[],
        help="set one config key (RocketMQ name, e.g. flushDiskType=SYNC_FLUSH); repeatable; wins over "
        "the file and ROCKETQ_* environment variables",
    )
    common.add_argument(
        "--data-dir", metavar="DIR", default=DEFAULT_DATA_DIR,
        help=f"where the servers keep their files (default: ./{DEFAULT_DATA_DIR})",
    )
    common.add_argument("--host", help=f"address to listen on and advertise (default: {DEFAULT_HOST})")
    common.add_argument(
        "-p", "--print-config", action="store_true",
        help="print the effective configuration and exit",
    )
    common.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level of the lines written to stderr (default: INFO)",
    )
    common.add_argument(
        "--log-file", metavar="FILE",
        help="also write the log to FILE, rotated by size (like RocketMQ's ~/logs/rocketmqlogs/broker.log)",
    )
    common.add_argument(
        "--log-max-bytes", metavar="N", type=positive, default=DEFAULT_LOG_MAX_BYTES,
        help=f"rotate --log-file when it reaches N bytes (default {DEFAULT_LOG_MAX_BYTES})",
    )
    common.add_argument(
        "--log-backups", metavar="N", type=non_negative, default=DEFAULT_LOG_BACKUPS,
        help=f"rotated files to keep: FILE.1 ... FILE.N (default {DEFAULT_LOG_BACKUPS})",
    )
    namesrv_port = argparse.ArgumentParser(add_help=False)
    namesrv_port.add_argument(
        "--namesrv-port", type=port, metavar="N", help="name server port (default 9876; 0 picks a free one)"
    )
    broker_opts = argparse.ArgumentParser(add_help=False)
    broker_opts.add_argument(
        "--broker-port", type=port, metavar="N", help="broker port (default 10911; 0 picks a free one)"
    )
    broker_opts.add_argument(
        "--grpc-port", type=grpc_port, metavar="N",
        help="RocketMQ 5 gRPC port (grpcPort, default 8081; 0 picks a free one, -1 turns it off)",
    )
    broker_opts.add_argument(
        "-n", "--namesrv-addr", metavar="ADDR", help="name server list 'host:port;host:port' (namesrvAddr)",
    )

    replicas = argparse.ArgumentParser(add_help=False)
    replicas.add_argument(
        "--replicas", type=non_negative, metavar="N", default=0,
        help="also run N slaves of the broker (a broker group, docs/ha.md), each with its own store "
        "under DATA/store-slaveI",
    )
    replicas.add_argument(
        "--controller", action="store_true",
        help="also run a controller and put the broker (and its slaves) in controller mode: a slave "
        "is promoted when the master dies (docs/ha.md)",
    )
    for role, parents, text in (
        ("up", [common, namesrv_port, broker_opts, replicas], "a name server and a broker in one process"),
        ("namesrv", [common, namesrv_port], "a name server"),
        ("broker", [common, broker_opts], "a broker"),
    ):
        sub = commands.add_parser(role, parents=parents, help=f"run {text}", description=f"Run {text}.")
        sub.set_defaults(handler=_handler(role))


def _handler(role: str) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        opts = ServeOptions(
            role=role,  # type: ignore[arg-type]
            data_dir=args.data_dir,
            config_file=args.config_file,
            sets=tuple(args.sets),
            host=args.host,
            namesrv_port=getattr(args, "namesrv_port", None),
            broker_port=getattr(args, "broker_port", None),
            grpc_port=getattr(args, "grpc_port", None),
            namesrv_addr=getattr(args, "namesrv_addr", None),
            replicas=getattr(args, "replicas", 0),
            controller=getattr(args, "controller", False),
        )
        plan = build_plan(opts)
        if args.print_config:
            print_config(plan, sys.stdout)
            return 0
        with _log_file(args.log_file, args.log_level, args.log_max_bytes, args.log_backups):
            return run(plan)

    return handle


def print_config(plan: ServePlan, out: TextIO) -> None:
    """RocketMQ's ``-p``: the effective config; a table on a terminal, properties text otherwise."""
    groups: list[tuple[str, list[object]]] = []
    if plan.namesrv is not None:
        groups.append(("name server", [plan.namesrv, plan.namesrv_server]))
    if plan.broker is not None:
        groups.append(("broker", [plan.broker, plan.store, plan.broker_server,
                                   *([plan.java] if plan.java is not None else [])]))
    if not out.isatty():
        for title, objs in groups:
            out.write(f"# {title}\n{dump_properties(objs, annotate=True)}")
        out.flush()
        return
    console = Console(file=out)
    for title, objs in groups:
        origins = {
            f.key: plan.configs.origin(type(obj), f.name) or ""
            for obj in reversed(objs)
            for f in config_fields(type(obj)).values()
        }
        notes = {  # short: the table has four columns on an 80-column terminal
            f.key: ("runtime" if f.update is Update.RUNTIME else "restart") if f.honoured
            else f"not honoured yet: {f.why}"
            for obj in reversed(objs)
            for f in config_fields(type(obj)).values()
        }
        table = Table("key", "value", "set by", "note", title=title, title_justify="left")
        for line in dump_properties(objs).splitlines():
            key, _, value = line.partition("=")
            table.add_row(key, value, origins.get(key, ""), notes.get(key, ""))
        console.print(table)


# ---------------------------------------------------------------------------------------------
# Running.


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        from rocketq.remoting.loop import new_event_loop

        return new_event_loop
    except ImportError:
        pass
    try:
        import uvloop

        return uvloop.new_event_loop
    except ImportError:
        return asyncio.new_event_loop


def run(plan: ServePlan) -> int:
    """Serve until SIGINT/SIGTERM; the exit code."""
    try:
        plan.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create data directory {plan.data_dir}: {exc.strerror or exc}") from None
    lock = None
    if plan.broker is not None and plan.store is not None:
        lock = PidFile(Path(str(plan.store.store_path_root_dir)) / PID_FILE_NAME)
        lock.acquire()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(serve(plan, sys.stdout))
    finally:
        if lock is not None:
            lock.release()


@contextmanager
def _log_file(path: str | None, level: str, max_bytes: int, backups: int) -> Iterator[None]:
    """A size-rotated log file beside stderr for the life of the servers."""
    if not path:
        yield
        return
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            target, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot open log file {target}: {exc.strerror or exc}", exit_code=2) from None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(level)
    logger = logging.getLogger("rocketq")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


class PidFile:
    """An exclusive flock on a file holding our PID, held until release() or the process's end.

    flock rather than a bare PID check: the kernel drops the lock when the holder dies, even by
    kill -9, so a stale file never blocks a restart. The file is emptied, not deleted, on release:
    unlinking a lock file lets a third process lock a new inode while a second still waits on the
    old one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CliError(f"cannot create lock file {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise CliError(
                f"the data directory {self.path.parent} is in use by another broker ({who}, lock "
                f"{self.path}); stop it or give this broker another --data-dir"
            ) from None
        self._fd = fd
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # a full disk: the lock is what matters, the PID is a courtesy
            log.warning("cannot write the PID into %s: %s", self.path, exc.strerror or exc)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing drops the flock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _controllers(plan: ServePlan) -> tuple[type | None, type | None]:
    namesrv_cls = broker_cls = None
    try:
        if plan.namesrv is not None:
            from rocketq.namesrv.server import NamesrvController

            namesrv_cls = NamesrvController
        if plan.broker is not None:
            from rocketq.broker.controller import BrokerController

            broker_cls = BrokerController
    except ImportError as exc:
        raise CliError(f"this build of rocketq cannot run a {plan.role} server yet ({exc})") from None
    return namesrv_cls, broker_cls


async def serve(plan: ServePlan, out: TextIO) -> int:
    """Start the plan's servers, announce READY on ``out``, wait for a signal, stop them."""
    namesrv_cls, broker_cls = _controllers(plan)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    main_task = asyncio.current_task()
    signals_seen = 0

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen == 1:
            log.info("%s received, shutting down", signal.Signals(signum).name)
            stop.set()
        elif main_task is not None:
            log.warning("%s received again, abandoning the graceful shutdown", signal.Signals(signum).name)
            main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / not a Unix loop
            pass

    started: list[tuple[str, Controller]] = []
    clean = True
    try:
        ready = []
        metrics: list[tuple[str, str]] = []
        grpc: str | None = None
        if namesrv_cls is not None:
            make_namesrv = functools.partial(namesrv_cls, plan.namesrv, plan.namesrv_server)
            namesrv = await _start("name server", make_namesrv, started)
            ready.append(f"namesrv={namesrv.address}")
            if getattr(plan.namesrv, "enable_controller_in_namesrv", False):
                from rocketq.cli.controller import start_in_namesrv

                await start_in_namesrv(plan, namesrv, started)
            ns_metrics = getattr(namesrv, "metrics_address", None)
            if ns_metrics:
                metrics.append(("namesrvMetrics" if broker_cls is not None else "metrics", ns_metrics))
        if broker_cls is not None and plan.broker is not None:
            broker_config = plan.broker
            if plan.use_embedded_namesrv and started:
                broker_config = dataclasses.replace(broker_config, namesrv_addr=started[0][1].address)
            if not broker_config.namesrv_addr_list:
                log.warning("namesrvAddr is not set: the broker will not register with any name server")
            if plan.controller:
                from rocketq.cli.controller import start_embedded

                controller = await start_embedded(plan, started)
                if namesrv_cls is not None:  # its series on the name server's metrics endpoint
                    namesrv.controller = controller  # type: ignore[attr-defined]
                broker_config = dataclasses.replace(broker_config, enable_controller_mode=True,
                                                    controller_addr=controller.address)
            make_broker = functools.partial(broker_cls, broker_config, plan.store, plan.broker_server,
                                            plan.java)
            broker = await _start("broker", make_broker, started)
            ready.append(f"broker={broker.address}")
            if plan.controller:
                from rocketq.cli.controller import wait_for_role

                await wait_for_role(broker)  # the broker of `up` is elected first: its slaves follow
            for i in range(1, plan.replicas + 1):
                make_slave = functools.partial(broker_cls, *replica_configs(plan, broker_config, i))
                slave = await _start(f"slave {i}", make_slave, started)
                ready.append(f"slave{i}={slave.address}")
            grpc = getattr(broker, "grpc_address", None)
            broker_metrics = getattr(broker, "metrics_address", None)
            if broker_metrics:
                metrics.append(("metrics", broker_metrics))
        ready.extend(f"controller={ctl.address}" for what, ctl in started if what == "controller")
        ready.extend(f"{key}={addr}" for key, addr in metrics)
        if grpc:
            ready.append(f"grpc={grpc}")  # last: readers of the older line ignore a trailing key
        if not stop.is_set():
            _announce(out, "READY " + " ".join(ready))
        await stop.wait()
    except asyncio.CancelledError:
        log.error("startup abandoned")
        clean = False
    finally:
        # also on a failed start: a half-started server still releases its ports and files
        if started:
            clean = await _shutdown_all(started) and clean
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    return 0 if clean else 1


async def _start(
    what: str, factory: Callable[[], Controller], started: list[tuple[str, Controller]]
) -> Controller:
    try:
        ctl = factory()
    except Exception as exc:
        raise _start_failure(what, exc) from None
    started.append((what, ctl))  # from here on it is shut down, even when start() fails half-way
    try:
        await ctl.start()
    except Exception as exc:
        raise _start_failure(what, exc) from None
    return ctl


def _start_failure(what: str, exc: Exception) -> CliError:
    log.debug("the %s failed to start", what, exc_info=exc)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return CliError(f"the {what} failed to start: {reason}")


async def _shutdown_all(started: list[tuple[str, Controller]]) -> bool:
    clean = True
    for what, ctl in reversed(started):
        try:
            await asyncio.wait_for(ctl.shutdown(), SHUTDOWN_TIMEOUT)
            log.info("the %s shut down", what)
        except TimeoutError:
            log.error("the %s did not shut down within %.0f s", what, SHUTDOWN_TIMEOUT)
            clean = False
        except asyncio.CancelledError:
            log.error("shutdown of the %s abandoned", what)
            return False
        except Exception as exc:
            log.error("the %s failed to shut down: %s", what, exc)
            log.debug("shutdown failure", exc_info=True)
            clean = False
    return clean


def _announce(out: TextIO, line: str) -> None:
    try:
        out.write(line + "\n")
        out.flush()
    except (BrokenPipeError, ValueError):  # nobody reads stdout any more: keep serving
        log.debug("stdout is closed; READY line not delivered")
    # Not at INFO: the log handler writes to stderr, so a terminal would show the line twice.
    log.debug("%s", line)

