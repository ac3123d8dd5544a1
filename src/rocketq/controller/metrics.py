"""The controller's Prometheus series (docs/ha.md, docs/operations.md), read at scrape time.

Served by ``rocketq controller --metrics-port``, and by the name server's endpoint when the
controller runs in the name server's process (``enableControllerInNamesrv``, ``up --controller``).
The groups' master, epochs and SyncStateSet are Raft-replicated, so every controller reports
them; which members are alive only the leader knows, so only the leader reports that.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily

from rocketq.remoting.http import MetricsEndpoint

if TYPE_CHECKING:
    from rocketq.controller.server import ControllerServer

__all__ = ["ControllerMetrics", "metric_families"]


def metric_families(ctl: ControllerServer) -> list[Any]:
    labels = ["controller"]
    leader = GaugeMetricFamily("rocketq_controller_is_leader",
                               "1 on the controller that leads (answers the brokers), 0 on the others",
                               labels=labels)
    raft = ctl.raft
    is_leader = raft is not None and raft.is_leader
    leader.add_metric([ctl.address], 1 if is_leader else 0)
    out: list[Any] = [leader]
    if raft is None:
        return out
    group_labels = [*labels, "broker_name"]
    epoch = GaugeMetricFamily("rocketq_controller_master_epoch",
                              "The broker group's master epoch (one more at each election)",
                              labels=group_labels)
    in_sync = GaugeMetricFamily("rocketq_controller_sync_state_set_size",
                                "Members of the group's SyncStateSet (the master and the in-sync slaves)",
                                labels=group_labels)
    members = GaugeMetricFamily("rocketq_controller_replicas", "Members registered in the broker group",
                                labels=group_labels)
    has_master = GaugeMetricFamily("rocketq_controller_has_master", "1 while the broker group has a master",
                                   labels=group_labels)
    alive = GaugeMetricFamily("rocketq_controller_alive_replicas",
                              "Members heartbeating to this controller (the leader only)",
                              labels=group_labels)
    now = int(time.monotonic() * 1000)
    with raft.lock:
        for name, g in sorted(raft.state.groups.items()):
            key = [ctl.address, name]
            epoch.add_metric(key, g.master_epoch)
            in_sync.add_metric(key, len(g.sync_state_set))
            members.add_metric(key, len(g.brokers))
            has_master.add_metric(key, 0 if g.master is None else 1)
            if is_leader:
                alive.add_metric(key, len(ctl.heartbeats.alive(g, now)))
    out += [epoch, in_sync, members, has_master]
    if is_leader:
        out.append(alive)
    return out


class _Collector:
    def __init__(self, ctl: ControllerServer) -> None:
        self._ctl = ctl

    def collect(self) -> list[Any]:
        return metric_families(self._ctl)


class ControllerMetrics(MetricsEndpoint):
    """The standalone controller's endpoint: its series and the process's."""

    def __init__(self, ctl: ControllerServer) -> None:
        super().__init__(_Collector(ctl))
