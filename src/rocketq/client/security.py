"""What a client's ``credentials`` and ``tls*`` options do to its transport: sign every request
(RocketMQ's AclClientRPCHook as the remoting client's request hook) and connect over TLS."""

from __future__ import annotations

from rocketq.acl.signature import RequestSigner
from rocketq.client.config import ClientConfig
from rocketq.remoting import RemotingClient
from rocketq.remoting.tls import client_context

__all__ = ["configure_transport"]


def configure_transport(remoting: RemotingClient, config: ClientConfig) -> None:
    """Install the signer and the TLS context ``config`` asks for (nothing when it asks for none)."""
    if config.credentials is not None:
        remoting.request_hook = RequestSigner(config.credentials)
    if config.tls:
        remoting.ssl_context = client_context(
            ca_file=config.tls_ca_file, cert_file=config.tls_cert_file, key_file=config.tls_key_file,
            verify=config.tls_verify)
