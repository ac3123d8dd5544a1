"""``rocketq dashboard``: a small web console over :class:`rocketq.admin.AdminClient`.

Cluster and broker overview, topics with routes and per-queue offsets, consumer groups with lag
per queue and a live lag/TPS chart, message search (id, key, time) with consume status, sending a
test message and resetting a group's offset. See docs/dashboard.md.
"""

from rocketq.dashboard.app import DashboardServer, build_app, start_dashboard

__all__ = ["DashboardServer", "build_app", "start_dashboard"]
