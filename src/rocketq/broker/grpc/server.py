"""The grpc.aio server of the broker: runs on the broker's event loop, beside remoting."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.grpc")

APACHE_PROXY_PORT = 8081


class GrpcServer:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._server: object | None = None
        self.service: object | None = None
        self.address = ""

    async def start(self, bind_host: str, port: int, advertised_host: str) -> None:
        import grpc

        from rocketq.broker.grpc.protocol import load
        from rocketq.broker.grpc.service import MessagingService

        _, _, stubs = load()
        service = MessagingService(self._ctl, advertised_host)
        from rocketq.broker.grpc.auth import AclInterceptor

        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)],
                                 interceptors=[AclInterceptor(self._ctl)])
        stubs.add_MessagingServiceServicer_to_server(service, server)
        from rocketq.broker.grpc.admin import AdminService
        from rocketq.broker.grpc.protocol import load_admin

        load_admin()[1].add_AdminServicer_to_server(AdminService(), server)
        host = bind_host or "0.0.0.0"
        try:
            bound = server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:
            if port != APACHE_PROXY_PORT:
                raise
            # The default port taken (another broker, a proxy): a free one, announced on READY,
            # rather than a broker that does not start for a port nobody asked for.
            log.warning("gRPC port %d is in use; serving gRPC on a free port instead", port)
            bound = server.add_insecure_port(f"{host}:0")
        await server.start()
        service.port = bound
        self._server, self.service = server, service
        self.address = f"{advertised_host}:{bound}"
        log.info("broker %s serves gRPC (apache.rocketmq.v2) on %s", self._ctl.broker_name, self.address)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            for c in list(getattr(self.service, "clients", {}).values()):
                c.close()
            await server.stop(0.5)  # type: ignore[attr-defined]
