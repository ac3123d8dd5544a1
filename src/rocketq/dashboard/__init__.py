"""``rocketq dashboard``: a small web console over :class:`rocketq.admin.AdminClient`.

Cluster and broker overview with live TPS, broker config (read and runtime update), topics with
routes, per-queue offsets and TPS, consumer groups with lag per queue and a live lag/TPS chart,
producer groups and their connections, dead letters with resend and consume-directly, message
search (id, key, time) with consume status, sending a test message, resetting a group's offset and
creating/updating/deleting topics and subscription groups. See docs/dashboard.md.
"""

from rocketq.dashboard.app import DashboardServer, build_app, start_dashboard

__all__ = ["DashboardServer", "build_app", "start_dashboard"]
