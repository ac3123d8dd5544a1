"""asyncio transport for the remoting protocol: servers, clients, channels, configs, the loop."""

from rocketq.remoting.channel import Channel
from rocketq.remoting.client import RemotingClient, split_address
from rocketq.remoting.config import RemotingClientConfig, RemotingServerConfig
from rocketq.remoting.endpoint import CloseListener, Handler, HandlerResult
from rocketq.remoting.loop import new_event_loop, run
from rocketq.remoting.server import RemotingServer

__all__ = [
    "Channel",
    "CloseListener",
    "Handler",
    "HandlerResult",
    "RemotingClient",
    "RemotingClientConfig",
    "RemotingServer",
    "RemotingServerConfig",
    "new_event_loop",
    "run",
    "split_address",
]
