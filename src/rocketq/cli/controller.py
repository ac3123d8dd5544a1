"""`rocketq controller`: a standalone RocketMQ 5 controller (docs/ha.md, controller mode).

Three of them, each given all three addresses with --peers, tolerate the loss of one. The Raft
port of each is its remoting port + 1. Prints ``READY controller=HOST:PORT`` once serving.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from rocketq.cli.argtypes import positive

if TYPE_CHECKING:
    from rocketq.cli.assembly import ServePlan

log = logging.getLogger("rocketq.cli")


def add_command(commands: Any) -> None:
    sub = commands.add_parser(
        "controller", help="run a controller (RocketMQ 5 controller mode: elects broker-group masters)",
        description="Run a controller. Brokers with enableControllerMode=true and controllerAddr=... "
        "learn their role from it; it promotes an in-sync slave when a master stops heartbeating.")
    sub.add_argument("--listen", metavar="HOST:PORT", required=True,
                     help="the remoting address (brokers' controllerAddr); Raft uses PORT + 1")
    sub.add_argument("--peers", metavar="A,B,C", default="",
                     help="every controller's HOST:PORT, this one included (default: only this one)")
    sub.add_argument("--data-dir", metavar="DIR", help="keep the Raft journal here (default: memory only)")
    sub.add_argument("--heartbeat-timeout-ms", type=positive, metavar="MS",
                     help="a broker silent this long is dead (default 10000, "
                     "controllerHeartBeatTimeoutMills)")
    sub.add_argument("--unclean-elect", action="store_true",
                     help="enableElectUncleanMaster: elect a replica outside the SyncStateSet when none "
                     "is in it")
    sub.add_argument("--metrics-port", type=int, default=-1, metavar="PORT",
                     help="serve Prometheus metrics on this port (0: a free one; default off); the READY "
                     "line then ends with metrics=HOST:PORT")
    sub.add_argument("--log-level", default="INFO", type=str.upper,
                     choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    sub.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    peers = [p.strip() for p in args.peers.replace(";", ",").split(",") if p.strip()]
    if peers and args.listen not in peers:
        peers.append(args.listen)
    return asyncio.run(_serve(args.listen, peers, args.data_dir, args.heartbeat_timeout_ms,
                              args.unclean_elect, args.metrics_port))


async def _serve(listen: str, peers: list[str], data_dir: str | None, timeout_ms: int | None,
                 unclean: bool, metrics_port: int = -1) -> int:
    # imported here: pysyncobj is the controller extra's, other commands must not need it
    from rocketq.controller.server import ControllerServer

    ctl = ControllerServer(listen, peers, data_dir, heartbeat_timeout_ms=timeout_ms, unclean_elect=unclean)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await ctl.start()
    metrics = None
    try:
        ready = f"READY controller={listen}"
        if metrics_port >= 0:
            from rocketq.controller.metrics import ControllerMetrics

            metrics = ControllerMetrics(ctl)
            await metrics.start(listen.rpartition(":")[0], metrics_port)
            ready += f" metrics={metrics.address}"
        print(ready, flush=True)
        await stop.wait()
    finally:
        if metrics is not None:
            await metrics.stop()
        await ctl.shutdown()
    print("controller stopped", file=sys.stderr)
    return 0


# -- `rocketq up --controller` --------------------------------------------------------------------


def _free_port_pair(host: str) -> int:
    """A port P with P and P + 1 free (the controller's remoting and Raft ports)."""
    for _ in range(100):
        with socket.socket() as a:
            a.bind((host, 0))
            p = int(a.getsockname()[1])
            with socket.socket() as b:
                try:
                    b.bind((host, p + 1))
                except OSError:
                    continue
            return p
    raise OSError("no two free consecutive ports for the controller")


async def start_embedded(plan: ServePlan, started: list[tuple[str, Any]]) -> Any:
    """A one-node controller beside the name server of `up`, its journal under DATA/controller."""
    from rocketq.controller.server import ControllerServer

    assert plan.broker is not None
    host = plan.broker.broker_ip1
    addr = f"{host}:{_free_port_pair(host)}"
    ctl = ControllerServer(addr, [addr], str(plan.data_dir / "controller"))
    await ctl.start()
    started.append(("controller", ctl))
    return ctl


async def wait_for_role(broker: Any, timeout: float = 20.0) -> None:
    """Until the controller has named the broker's role (a one-node Raft elects itself first)."""
    deadline = time.monotonic() + timeout
    manager = getattr(broker, "replicas_manager", None)
    while manager is not None and not manager.role_known and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    if manager is not None and not manager.role_known:
        log.warning("the controller has not named the broker's role in %.0f s", timeout)


async def start_in_namesrv(plan: ServePlan, namesrv: Any, started: list[tuple[str, Any]]) -> Any:
    """enableControllerInNamesrv: the controller's codes on the name server's own port."""
    from rocketq.controller.server import ControllerServer

    assert plan.namesrv is not None
    peers = [p.strip() for p in plan.namesrv.controller_peers.replace(",", ";").split(";") if p.strip()]
    if peers and namesrv.address not in peers:
        log.warning("controllerPeers does not name this name server (%s)", namesrv.address)
    ctl = ControllerServer(namesrv.address, peers or [namesrv.address], str(plan.data_dir / "controller"),
                           server=namesrv.remoting_server)
    await ctl.start()
    started.insert(0, ("controller", ctl))  # stopped after the name server whose port it shares
    namesrv.controller = ctl  # its series on the name server's metrics endpoint
    return ctl
