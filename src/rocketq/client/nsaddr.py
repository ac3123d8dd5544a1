"""Finding the name servers when none is configured (RocketMQ's TopAddressing).

Order: the config's ``namesrv_addr``, then env ``NAMESRV_ADDR``, then the HTTP address server
(``namesrv_domain`` or env ``ROCKETMQ_NAMESRV_DOMAIN``), which answers ``host:port;host:port``
as plain text. The HTTP call is blocking urllib, so it runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import urllib.error
import urllib.request
from typing import Final

from rocketq.client.config import ClientConfig

__all__ = [
    "ENV_NAMESRV_ADDR",
    "ENV_NAMESRV_DOMAIN",
    "address_server_url",
    "fetch_from_address_server",
    "find_namesrv_addr",
]

log = logging.getLogger("rocketq.client")

ENV_NAMESRV_ADDR: Final = "NAMESRV_ADDR"
ENV_NAMESRV_DOMAIN: Final = "ROCKETMQ_NAMESRV_DOMAIN"
DEFAULT_PORT: Final = 8080


def address_server_url(domain: str, subgroup: str = "nsaddr", unit_name: str | None = None) -> str:
    """``http://<domain>[:8080]/rocketmq/<subgroup>[-<unit>?nofix=1]`` (a full URL is kept as is)."""
    if domain.startswith(("http://", "https://")):
        url = domain
    else:
        host = domain if ":" in domain else f"{domain}:{DEFAULT_PORT}"
        url = f"http://{host}/rocketmq/{subgroup}"
    if unit_name:
        url += f"-{unit_name}?nofix=1"
    return url


def fetch_from_address_server(url: str, timeout: float = 3.0) -> str | None:
    """The name server list the address server answers, or None (logged) if it does not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            if response.status != 200:
                log.error("fetch nameserver address failed. statusCode=%s", response.status)
                return None
            text: str = response.read().decode("utf-8", "replace").strip()
    except (urllib.error.URLError, OSError, ValueError) as e:
        log.error("fetch name server address from %s failed: %s", url, e)
        return None
    if not text:
        log.error("fetch name server address from %s: empty answer", url)
        return None
    return text


def _domain(config: ClientConfig) -> str | None:
    return config.namesrv_domain or os.environ.get(ENV_NAMESRV_DOMAIN) or None


async def find_namesrv_addr(config: ClientConfig, *, timeout: float = 3.0) -> str | None:
    """The name server list to use, or None when nothing names one."""
    if config.namesrv_addr:
        return config.namesrv_addr
    env = os.environ.get(ENV_NAMESRV_ADDR, "").strip()
    if env:
        return env
    return await fetch_from_configured_server(config, timeout=timeout)


async def fetch_from_configured_server(config: ClientConfig, *, timeout: float = 3.0) -> str | None:
    domain = _domain(config)
    if domain is None:
        return None
    url = address_server_url(domain, config.namesrv_domain_subgroup, config.unit_name)
    return await asyncio.to_thread(fetch_from_address_server, url, timeout)
