"""asyncio transport for the remoting protocol: servers, clients, channels, configs, the loop."""

from rocketq.remoting.channel import Channel, channel_address
from rocketq.remoting.client import RemotingClient, split_address
from rocketq.remoting.config import RemotingClientConfig, RemotingServerConfig
from rocketq.remoting.endpoint import BatchHandler, CloseListener, Handler, HandlerResult, handles_runs
from rocketq.remoting.loop import new_event_loop, run
from rocketq.remoting.server import RemotingServer

__all__ = [
    "BatchHandler",
    "Channel",
    "CloseListener",
    "Handler",
    "HandlerResult",
    "RemotingClient",
    "RemotingClientConfig",
    "RemotingServer",
    "RemotingServerConfig",
    "channel_address",
    "handles_runs",
    "new_event_loop",
    "run",
    "split_address",
]
