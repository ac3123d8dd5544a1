"""ClientConfig: the settings every producer and consumer shares (RocketMQ's ClientConfig).

Field names are the snake_case of RocketMQ's keys and the defaults are RocketMQ's (PROTOCOL.md
§4.4). Intervals and timeouts keep RocketMQ's milliseconds so a value copied from a Java
configuration means the same thing here; the Python APIs that take a ``timeout`` argument take
seconds, like asyncio.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import socket
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Self

from rocketq.acl.signature import SessionCredentials

# Re-exported under their old names; the rules live in rocketq.client.namespace.
from rocketq.client.namespace import unwrap as unwrap_namespace
from rocketq.client.namespace import wrap as wrap_namespace
from rocketq.codec.codes import LanguageCode

__all__ = [
    "DEFAULT_INSTANCE_NAME",
    "ClientConfig",
    "ServiceState",
    "local_ip",
    "process_instance_name",
    "unwrap_namespace",
    "wrap_namespace",
]

DEFAULT_INSTANCE_NAME: Final = "DEFAULT"

# Taken once per process: every client of the process that keeps the default instance name gets
# the same id (and so shares one MQClientInstance), while a recycled pid in a later process does not
# collide with a consumer id the broker still remembers.
_PROCESS_NANOS: Final = time.monotonic_ns()


class ServiceState(enum.Enum):
    """Lifecycle of a producer, consumer or client instance (RocketMQ's ServiceState)."""

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


def process_instance_name() -> str:
    """What ``DEFAULT`` becomes: ``<pid>#<nanos>`` (RocketMQ 5.x's pid#nanoTime)."""
    return f"{os.getpid()}#{_PROCESS_NANOS}"


@lru_cache(maxsize=1)
def local_ip() -> str:
    """This host's address as RocketMQ puts it in client ids and message ids.

    Resolved from the host name only (no packet leaves the machine); loopback when that fails.
    """
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return ip if ip.count(".") == 3 else "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings shared by every client of one MQClientInstance.

    The instance is shared per ``client_id()``: the first producer or consumer that starts it
    supplies the settings the instance itself uses (name servers, intervals, timeouts).
    """

    # "host:port;host:port". None: env NAMESRV_ADDR, then the HTTP address server (namesrv_domain).
    namesrv_addr: str | None = None
    # The address server ("host[:port]") RocketMQ reads from the rocketmq.namesrv.domain property;
    # consulted only when set here or in env ROCKETMQ_NAMESRV_DOMAIN.
    namesrv_domain: str | None = None
    namesrv_domain_subgroup: str = "nsaddr"
    client_ip: str = dataclasses.field(default_factory=local_ip)
    instance_name: str = DEFAULT_INSTANCE_NAME
    client_callback_executor_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 4)
    namespace: str | None = None
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    pull_time_delay_mills_when_exception: int = 1_000
    mq_client_api_timeout: int = 3_000
    connect_timeout_millis: int = 3_000
    client_channel_max_idle_time_seconds: int = 120
    unit_mode: bool = False
    unit_name: str | None = None
    vip_channel_enabled: bool = False
    decode_read_body: bool = True
    decode_decompress_body: bool = True
    language: LanguageCode = LanguageCode.PYTHON
    # Message trace (docs/trace.md): producers and consumers write RocketMQ's trace records to
    # trace_topic (None: RMQ_SYS_TRACE_TOPIC); Java's enableMsgTrace / customizedTraceTopic.
    enable_trace: bool = False
    trace_topic: str | None = None
    # ACL: every request this client sends is signed with these (RocketMQ's AclClientRPCHook).
    credentials: SessionCredentials | None = None
    # TLS to brokers and name servers (Java's useTLS): the CA file that signs the servers'
    # certificates (None: the system's), and a client certificate for servers that ask for one.
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_verify: bool = True

    def transport_key(self) -> tuple[object, ...]:
        """What a shared MQClientInstance's transport is made of: clients that differ here need
        instances of their own."""
        return (self.credentials, self.tls, self.tls_ca_file, self.tls_cert_file, self.tls_key_file,
                self.tls_verify)

    def resolved_instance_name(self) -> str:
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            return process_instance_name()
        return self.instance_name

    def client_id(self) -> str:
        """``<ip>@<instance>[@<unit>]``: the id brokers know this client by (buildMQClientId)."""
        cid = f"{self.client_ip}@{self.resolved_instance_name()}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid

    def with_namespace(self, resource: str) -> str:
        return wrap_namespace(self.namespace, resource)

    def without_namespace(self, resource: str) -> str:
        return unwrap_namespace(self.namespace, resource)

    def client_config(self) -> ClientConfig:
        """Just the ClientConfig part of a subclass (what an MQClientInstance keeps)."""
        if type(self) is ClientConfig:
            return self
        names = [f.name for f in dataclasses.fields(ClientConfig)]
        return ClientConfig(**{n: getattr(self, n) for n in names})

    def replace(self, **changes: object) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
