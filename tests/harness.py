"""Start real rocketq processes (and client processes) for integration and compat tests.

Everything runs as a subprocess on 127.0.0.1: a crash on either side fails one test instead of
killing pytest, and the server is exercised exactly as a user starts it (``rocketq up``).

The ``rocketq up`` contract these helpers rely on: it prints one stdout line
``READY namesrv=HOST:PORT broker=HOST:PORT`` once both are serving (flushed), and SIGTERM stops it
cleanly (exit code 0). Ports 0 mean "pick free ports".

Output goes to files, not pipes, so a chatty process can never block on a full pipe and the log
is still there to quote when a test fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pytest

READY_RE = re.compile(
    r"^READY namesrv=(?P<namesrv>\S+:\d+) broker=(?P<broker>\S+:\d+)(?: \S+=\S+)*\s*$", re.MULTILINE
)
DEFAULT_READY_TIMEOUT = 30.0
DEFAULT_STOP_GRACE = 10.0
TAIL_CHARS = 4000


class HarnessError(RuntimeError):
    """A process did not start, become ready or stop as its contract says."""


def rocketq_command() -> list[str]:
    """The ``rocketq`` console script of the interpreter running the tests (the project's venv).

    ``ROCKETQ_COMMAND`` (shell words) replaces it, e.g. to run the same tests against another
    build that honours the same ``up`` contract.
    """
    override = os.environ.get("ROCKETQ_COMMAND")
    if override:
        return shlex.split(override)
    script = Path(sys.executable).with_name("rocketq")
    if script.exists():
        return [str(script)]
    # Not installed as a script (e.g. a bare checkout): the entry point, called the same way.
    return [sys.executable, "-c", "import sys; from rocketq.cli.main import main; sys.exit(main())"]


# The modules `rocketq up` serves with (DESIGN.md's layout); until both exist there is no server.
SERVER_MODULES = ("namesrv/server.py", "broker/controller.py")


def server_available() -> tuple[bool, str]:
    """Whether a rocketq server has been written yet; cluster tests skip (only) while it has not.

    Decided by the presence of the server modules, never by trying to start one: once they exist,
    every failure to start, serve or stop is a test failure. With ``ROCKETQ_COMMAND`` set, the
    command given is the server.
    """
    if os.environ.get("ROCKETQ_COMMAND"):
        return True, ""
    spec = importlib.util.find_spec("rocketq")
    if spec is None or not spec.submodule_search_locations:
        return False, "the rocketq package is not importable"
    package = Path(next(iter(spec.submodule_search_locations)))
    missing = [m for m in SERVER_MODULES if not (package / m).is_file()]
    if missing:
        return False, f"not written yet: {', '.join('rocketq/' + m for m in missing)}"
    return True, ""


def _tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class ManagedProcess:
    """A subprocess in its own session with stdout/stderr in files; stopped by its own pid/group."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], stdout_path: Path, stderr_path: Path):
        self.name = name
        self.popen = popen
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
        self.exit_code: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.returncode() is None

    def returncode(self) -> int | None:
        """Exit code (negative signal number) once exited, else None; never reaps the process."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        # WNOWAIT leaves an exited child unreaped: while it is a zombie its pid and group id
        # cannot be reused, so signalling the group afterwards can only reach our own processes.
        try:
            info = os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.popen.poll()
        if info is None:
            return None
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def stdout(self) -> str:
        return self.stdout_path.read_text("utf-8", "replace") if self.stdout_path.exists() else ""

    def describe(self) -> str:
        """Exit state plus the tails of both streams, for assertion messages."""
        code = self.returncode()
        state = "running" if code is None else f"exited with {code}"
        return (
            f"{self.name} (pid {self.pid}, {state})\n"
            f"--- stdout tail ({self.stdout_path}) ---\n{_tail(self.stdout_path)}\n"
            f"--- stderr tail ({self.stderr_path}) ---\n{_tail(self.stderr_path)}"
        )

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """Poll stdout until ``pattern`` matches; fail fast if the process exits first."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            match = pattern.search(self.stdout())
            if match:
                return match
            if not self.alive():
                raise HarnessError(
                    f"{self.name} exited before printing {pattern.pattern!r}\n{self.describe()}"
                )
            if time.monotonic() >= deadline:
                self.kill()
                raise HarnessError(
                    f"{self.name} printed no {pattern.pattern!r} within {timeout:.0f}s "
                    f"(is the line flushed?)\n{self.describe()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> int:
        """SIGTERM, wait ``grace`` seconds, then SIGKILL the process group. Returns the exit code.

        The exit code is the one SIGTERM produced when the process went in time; -9 means it had
        to be killed.
        """
        if self.exit_code is not None:
            return self.exit_code
        if self.alive():
            try:
                self.popen.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.kill()
        self.exit_code = self.popen.returncode
        return self.exit_code

    def kill(self) -> None:
        """SIGKILL whatever is left of the group, then reap the process."""
        if self.popen.returncode is None:
            # Helpers the process spawned share its session (start_new_session): end them too, so
            # a test never leaves a port-holding orphan behind.
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.popen.wait()

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_process(
    args: Sequence[str],
    *,
    name: str,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start ``args`` in a new session, stdout/stderr into ``log_dir/<name>.out|.err``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = log_dir / f"{name}.out"
    stderr_path = log_dir / f"{name}.err"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        popen = subprocess.Popen(
            list(args), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
        )
    return ManagedProcess(name, popen, stdout_path, stderr_path)


@dataclass(frozen=True, slots=True)
class Cluster:
    """A running ``rocketq up``: name server and broker addresses as it announced them."""

    namesrv: str
    broker: str
    proc: ManagedProcess
    data_dir: Path

    @property
    def broker_port(self) -> int:
        return int(self.broker.rsplit(":", 1)[1])

    @property
    def namesrv_port(self) -> int:
        return int(self.namesrv.rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self.proc.alive()

    def describe(self) -> str:
        head = f"cluster namesrv={self.namesrv} broker={self.broker} data={self.data_dir}"
        return f"{head}\n{self.proc.describe()}"

    def stop(self, grace: float = DEFAULT_STOP_GRACE) -> int:
        return self.proc.stop(grace)


def start_cluster(
    tmp_path: Path,
    *extra_args: str,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Cluster:
    """``rocketq up`` on free ports with its data under ``tmp_path``; returns once READY."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [
        *rocketq_command(), "up", "--data-dir", str(data_dir),
        "--namesrv-port", "0", "--broker-port", "0", *extra_args,
    ]
    proc = start_process(args, name="rocketq-up", log_dir=tmp_path / "logs", env=env)
    try:
        match = proc.wait_for(READY_RE, ready_timeout)
    except BaseException:
        proc.stop(grace=2.0)
        raise
    return Cluster(match["namesrv"], match["broker"], proc, data_dir)


NAMESRV_READY = re.compile(r"^READY namesrv=(?P<addr>\S+:\d+)\s*$", re.MULTILINE)
BROKER_READY = re.compile(r"^READY broker=(?P<addr>\S+:\d+)(?: metrics=\S+)?(?: grpc=\S+)?\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Server:
    """One ``rocketq namesrv`` or ``rocketq broker`` process and the address it announced."""

    name: str
    addr: str
    proc: ManagedProcess


def start_server(tmp_path: Path, name: str, args: Sequence[str], ready: re.Pattern[str]) -> Server:
    """``rocketq <args>`` once it printed ``ready`` (its ``addr`` group); stopped if it never does."""
    proc = start_process([*rocketq_command(), *args], name=name, log_dir=tmp_path / "logs")
    try:
        match = proc.wait_for(ready, DEFAULT_READY_TIMEOUT)
    except BaseException:
        proc.stop(grace=2.0)
        raise
    return Server(name, match["addr"], proc)


def start_namesrv_server(tmp_path: Path) -> Server:
    """A lone ``rocketq namesrv`` on a free port, data under ``tmp_path/ns``."""
    return start_server(tmp_path, "namesrv", ["namesrv", "--data-dir", str(tmp_path / "ns"),
                                              "--namesrv-port", "0"], NAMESRV_READY)


def start_broker_server(tmp_path: Path, name: str, namesrv: str, *extra: str) -> Server:
    """A lone ``rocketq broker`` named ``name`` registering with ``namesrv``; ``extra`` flags last."""
    return start_server(tmp_path, name, [
        "broker", "--data-dir", str(tmp_path / name), "--broker-port", "0", "-n", namesrv,
        "--set", f"brokerName={name}", *extra,
    ], BROKER_READY)


@contextlib.contextmanager
def namesrv_and_brokers(tmp_path: Path, brokers: Sequence[str], *extra: str) -> Iterator[list[Server]]:
    """[name server, *brokers], each its own process with its own data dir (``extra`` flags go to
    every broker); stopped in reverse order."""
    started: list[Server] = []
    try:
        ns = start_namesrv_server(tmp_path)
        started.append(ns)
        for name in brokers:
            started.append(start_broker_server(tmp_path, name, ns.addr, *extra))
        yield started
    finally:
        for server in reversed(started):
            server.proc.stop(grace=DEFAULT_STOP_GRACE)


@dataclass(frozen=True, slots=True)
class CompletedRun:
    """A finished client process: exit code, both streams, and whether it hit our timeout."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    elapsed: float
    events: tuple[dict[str, Any], ...] = field(default=())

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]

    @property
    def summary(self) -> dict[str, Any]:
        found = self.of("summary")
        return found[-1] if found else {}

    def describe(self, chars: int = TAIL_CHARS) -> str:
        state = "timed out (killed)" if self.timed_out else f"exit {self.returncode}"
        return (
            f"$ {' '.join(self.args)}\n{state} after {self.elapsed:.1f}s; summary={self.summary}\n"
            f"--- stderr tail ---\n{self.stderr[-chars:]}\n--- stdout tail ---\n{self.stdout[-chars:]}"
        )


# A fixture-provided client launcher: (mode, topic, group, count, *options, timeout=...) -> run.
ClientRunner = Callable[..., CompletedRun]


def parse_json_lines(text: str) -> tuple[dict[str, Any], ...]:
    """Objects from the lines that are JSON objects; anything else a client printed is ignored."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return tuple(events)


def _kill_group(popen: subprocess.Popen[bytes]) -> None:
    # Only called while the child is unreaped, so its group id is still ours.
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(
    args: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> CompletedRun:
    """Run a client to completion in its own session; on timeout kill its whole group."""
    started = time.monotonic()
    popen = subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
    )
    timed_out = False
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(popen)
        out, err = popen.communicate()
    except BaseException:
        # pytest-timeout or Ctrl-C: do not leave the client running behind the test.
        _kill_group(popen)
        popen.wait()
        raise
    stdout = out.decode("utf-8", "replace")
    return CompletedRun(
        args=tuple(args), returncode=popen.returncode, stdout=stdout,
        stderr=err.decode("utf-8", "replace"), timed_out=timed_out,
        elapsed=time.monotonic() - started, events=parse_json_lines(stdout),
    )


def unique_name(prefix: str) -> str:
    """Topic/group names that never collide between tests sharing one cluster."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def assert_client_ok(run: CompletedRun, cluster: Cluster) -> CompletedRun:
    """A client run that exited 0 with an ok summary; otherwise everything needed to debug it."""
    assert run.returncode == 0 and run.summary.get("ok"), f"{run.describe()}\n\n{cluster.describe()}"
    return run


# -- small stores and one cluster per test module ----------------------------------------------------------


def small_store(
    commit_log: int = 16 * 1024 * 1024, cq_entries: int = 6000, slots: int = 1000, index: int = 4000
) -> tuple[str, ...]:
    """`--set` flags for a store sized for tests: the 1 GiB defaults would cost real disk per cluster."""
    settings = {
        "mappedFileSizeCommitLog": commit_log,
        "mappedFileSizeConsumeQueue": cq_entries * 20,
        "maxHashSlotNum": slots,
        "maxIndexNum": index,
    }
    return tuple(arg for key, value in settings.items() for arg in ("--set", f"{key}={value}"))


SMALL_STORE = small_store()


def start_acl_cluster(tmp_path: Path, plain_acl: str, *extra_args: str) -> Cluster:
    """``rocketq up`` with aclEnable on the broker and the name server, the accounts of
    ``plain_acl`` in <data-dir>/conf/plain_acl.yml (where both look for it)."""
    conf = tmp_path / "data" / "conf"
    conf.mkdir(parents=True)
    (conf / "plain_acl.yml").write_text(plain_acl)
    return start_cluster(tmp_path, *SMALL_STORE, *extra_args, "--set", "aclEnable=true",
                         "--set", "namesrv.aclEnable=true")


# The broker as strict as Apache RocketMQ 4.9.8 (rocketq/broker/compat.py): every test of a module
# whose cluster fixture is built with ``also_as_4_9=True`` runs a second time against it.
AS_4_9: Final = ("--set", "compatibilityMode=4.9")


def module_cluster(name: str, *args: str, also_as_4_9: bool = False, slow_as_4_9: bool = False) -> Any:
    """A module-scoped pytest fixture running one real `rocketq up` for every test of the module;
    with ``also_as_4_9``, the module runs twice: against the broker as it is (test ids end in
    ``[rocketq]``) and in its 4.9 compatibility mode (``[as-4.9]``). ``slow_as_4_9`` marks the second
    run ``slow`` (`make test-all` only), for a module whose run alone takes a minute."""
    import pytest

    def run(tmp_path_factory: pytest.TempPathFactory, mode: tuple[str, ...]) -> Any:
        c = start_cluster(tmp_path_factory.mktemp(name), *args, *mode)
        try:
            yield c
        finally:
            c.stop()

    if not also_as_4_9:
        @pytest.fixture(scope="module")
        def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
            yield from run(tmp_path_factory, ())

        return cluster

    modes = {"rocketq": (), "as-4.9": AS_4_9}

    params = ["rocketq", pytest.param("as-4.9", marks=pytest.mark.slow) if slow_as_4_9 else "as-4.9"]

    @pytest.fixture(scope="module", params=params, name="cluster")
    def cluster_in_mode(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
        yield from run(tmp_path_factory, modes[request.param])

    return cluster_in_mode


# -- waiting ------------------------------------------------------------------------------------------------


def _not_yet_errors() -> tuple[type[Exception], ...]:
    """What a check may raise meaning "not yet": an assertion, or a rocketq error such as the route a
    broker has not registered yet. Imported late: the harness itself imports without rocketq."""
    from rocketq.errors import RocketQError

    return AssertionError, RocketQError


def _give_up_if_late(deadline: float, failure: Exception | None, timeout: float, check: object) -> None:
    """Past the deadline, the last failure (or a plain "not met") ends the wait."""
    if time.monotonic() >= deadline:
        if failure is not None:
            raise failure
        raise AssertionError(f"condition not met within {timeout} s: {check}")


def grpc_address(cluster: Cluster) -> str:
    """The ``grpc=HOST:PORT`` a ``rocketq up`` announced on its READY line (docs/grpc.md)."""
    match = re.search(r"^READY .* grpc=(\S+)", cluster.proc.stdout(), re.MULTILINE)
    assert match, f"no grpc= on the READY line\n{cluster.describe()}"
    return match[1]


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy without raising; its value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        failure = None
        try:
            if value := check():
                return value
        except _not_yet_errors() as e:
            failure = e
        _give_up_if_late(deadline, failure, timeout, check)
        time.sleep(interval)


async def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    """``eventually`` on the event loop: the predicate may be sync or return an awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        failure = None
        try:
            value = predicate()
            if value := (await value if inspect.isawaitable(value) else value):
                return value
        except _not_yet_errors() as e:
            failure = e
        _give_up_if_late(deadline, failure, timeout, predicate)
        await asyncio.sleep(interval)


def free_port() -> int:
    """A port nothing listens on right now (to point a client at a cluster that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- `rocketq admin` run in-process against a real cluster ---------------------------------------------------


@contextlib.contextmanager
def _cli_logging_restored() -> Iterator[None]:
    """main() configures the "rocketq" logger for a command line; put it back for the next test."""
    logger = logging.getLogger("rocketq")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers[:] = saved[2]


class AdminRun:
    """``rocketq admin <command> ... -n <namesrv>`` run by ``main()`` with stdout/stderr captured."""

    def __init__(self, capsys: pytest.CaptureFixture[str], namesrv: str) -> None:
        self.capsys = capsys
        self.namesrv = namesrv

    def raw(self, *args: str) -> tuple[int, str, str]:
        from rocketq.cli.main import main

        self.capsys.readouterr()
        with _cli_logging_restored():
            code = main(["admin", *args, "-n", self.namesrv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        """The command's --json output; fails the test (with stderr) when it does not exit 0."""
        code, out, err = self.raw(*args, "--json")
        assert code == 0, f"rocketq admin {' '.join(args)} exited {code}: {err}"
        return json.loads(out)

    def fails(self, *args: str, code: int = 1) -> str:
        """The one error line of a command expected to fail with ``code``."""
        got, out, err = self.raw(*args)
        assert got == code, f"expected exit {code}, got {got}: {out}{err}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rocketq: error: "), err
        assert "Traceback" not in err
        return lines[0]


# -- broker groups (master + slaves, docs/ha.md) ---------------------------------------------------------


def start_group_member(tmp_path: Path, name: str, namesrv: str, broker_id: int, *extra: str,
                       role: str = "ASYNC_MASTER") -> Server:
    """One broker of group ``name``: the master (``broker_id`` 0, ``role`` ASYNC_MASTER or SYNC_MASTER) or
    a slave (``broker_id`` > 0); each keeps its data under ``tmp_path/<name>-<id>``, so a killed member
    restarts from its own store."""
    role = role if broker_id == 0 else "SLAVE"
    return start_server(tmp_path, f"{name}-{broker_id}", [
        "broker", "--data-dir", str(tmp_path / f"{name}-{broker_id}"), "--broker-port", "0", "-n", namesrv,
        "--set", f"brokerName={name}", "--set", f"brokerId={broker_id}", "--set", f"brokerRole={role}",
        *extra,
    ], BROKER_READY)


# -- controllers (RocketMQ 5 controller mode, docs/ha.md) ------------------------------------------------


def free_port_pair() -> int:
    """A port P with P and P + 1 free: a controller listens on P and runs Raft on P + 1."""
    for _ in range(200):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            p = int(a.getsockname()[1])
            if p >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", p + 1))
                except OSError:
                    continue
                return p
    raise RuntimeError("no free port pair")


CONTROLLER_READY = re.compile(r"^READY controller=(?P<addr>\S+:\d+)\s*$", re.MULTILINE)


def start_controllers(tmp_path: Path, n: int = 3, *extra: str) -> list[Server]:
    """`n` ``rocketq controller`` processes forming one Raft group (journal under tmp_path)."""
    addrs = [f"127.0.0.1:{free_port_pair()}" for _ in range(n)]
    started: list[Server] = []
    try:
        for i, addr in enumerate(addrs):
            started.append(start_server(tmp_path, f"controller-{i}", [
                "controller", "--listen", addr, "--peers", ",".join(addrs),
                "--data-dir", str(tmp_path / f"controller-{i}"), *extra], CONTROLLER_READY))
    except BaseException:
        for s in started:
            s.proc.stop(grace=2.0)
        raise
    return started


def start_controller_member(tmp_path: Path, name: str, namesrv: str, controllers: Sequence[Server],
                            index: int, *extra: str, role: str = "SYNC_MASTER") -> Server:
    """Member ``index`` of group ``name`` in controller mode: the controllers pick its role;
    ``role`` is how it acks once it is master. Data under ``tmp_path/<name>-c<index>``."""
    return start_server(tmp_path, f"{name}-c{index}", [
        "broker", "--data-dir", str(tmp_path / f"{name}-c{index}"), "--broker-port", "0", "-n", namesrv,
        "--set", f"brokerName={name}", "--set", f"brokerRole={role}", "--set", "enableControllerMode=true",
        "--set", "controllerAddr=" + ";".join(c.addr for c in controllers), *extra,
    ], BROKER_READY)
