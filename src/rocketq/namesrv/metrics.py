"""The name server's Prometheus endpoint (``metricsPort``), read at scrape time.

Route-table sizes come from RouteInfoManager when Prometheus asks; request counts and latencies by
request code come from the remoting server's per-request observer (a RequestStats), the same one
the broker uses, so both roles export ``rocketmq_rpc_latency`` and ``rocketmq_rpc_responses_total``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily

from rocketq.remoting.http import MetricsEndpoint, RequestStats, request_metric_families

if TYPE_CHECKING:
    from rocketq.namesrv.server import NamesrvController

__all__ = ["NamesrvMetrics"]

log = logging.getLogger("rocketq.namesrv.metrics")


class NamesrvMetrics(MetricsEndpoint):
    """Owns the registry, the request observer and the HTTP endpoint of one name server."""

    def __init__(self, controller: NamesrvController) -> None:
        self._ctl = controller
        self.requests = RequestStats()
        super().__init__(_NamesrvCollector(self))

    async def start(self, host: str, port: int) -> None:
        setter = getattr(self._ctl.remoting_server, "set_request_observer", None)
        if setter is not None:
            setter(self.requests.observe)
        await super().start(host, port)

    async def stop(self) -> None:
        setter = getattr(self._ctl.remoting_server, "set_request_observer", None)
        if setter is not None:
            setter(None)
        await super().stop()


class _NamesrvCollector:
    def __init__(self, metrics: NamesrvMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Any]:
        ctl = self._m._ctl
        names = ["node_type", "node_id"]
        base = ["namesrv", ctl.address]
        routes = ctl.route_info_manager
        per_cluster: dict[str, int] = {}
        for (cluster, _addr), _live in routes.live_brokers():
            per_cluster[cluster] = per_cluster.get(cluster, 0) + 1
        brokers = GaugeMetricFamily("rocketmq_namesrv_live_brokers",
                                    "Broker addresses registered and alive, by cluster",
                                    labels=[*names, "cluster"])
        for cluster, n in sorted(per_cluster.items()):
            brokers.add_metric([*base, cluster], n)
        yield brokers
        info = routes.get_all_cluster_info()
        for name, text, value in (
            ("rocketmq_namesrv_topics", "Topics with a route", len(routes.get_all_topic_list().topic_list)),
            ("rocketmq_namesrv_clusters", "Clusters with at least one broker", len(info.cluster_addr_table)),
            ("rocketmq_namesrv_broker_names", "Broker names (master/slave sets)",
             len(info.broker_addr_table)),
            ("rocketmq_remoting_connections", "Open connections (brokers and clients)",
             len(ctl.remoting_server.channels)),
        ):
            g = GaugeMetricFamily(name, text, labels=names)
            g.add_metric(base, value)
            yield g
        yield from request_metric_families(self._m.requests, dict(zip(names, base, strict=True)))
        controller = getattr(ctl, "controller", None)  # a controller in this process (docs/ha.md)
        if controller is not None:
            yield from controller.metric_families()
