"""The cluster page's controller section (RocketMQ 5 controller mode, docs/ha.md): who leads the
controllers, and each broker group's master, epochs and SyncStateSet.

The dashboard is given name servers only, so it finds the controllers the way a newcomer would:
the first broker that answers says in its configuration whether it runs in controller mode and
where its controllers are (``enableControllerMode``, ``controllerAddr``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketq.dashboard.render import esc, table
from rocketq.errors import RocketQError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.admin.models import ClusterBroker

__all__ = ["controller_section", "find_controllers"]


async def find_controllers(admin: AdminClient, brokers: Sequence[ClusterBroker]) -> str | None:
    """``controllerAddr`` of the first broker that answers in controller mode (None: no such)."""
    for b in brokers:
        if b.error:
            continue
        try:
            config = await admin.get_broker_config(b.addr)
        except RocketQError:
            continue
        if config.get("enableControllerMode", "false").lower() != "true":
            return None  # the members of a cluster share the mode: one answer is enough
        return config.get("controllerAddr") or None
    return None


async def controller_section(admin: AdminClient, brokers: Sequence[ClusterBroker]) -> str:
    """HTML for the cluster page: empty when no broker runs in controller mode."""
    addr = await find_controllers(admin, brokers)
    if addr is None:
        return ""
    try:
        meta = await admin.get_controller_meta_data(addr)
        groups = await admin.get_sync_state_data(addr, sorted({b.broker_name for b in brokers}))
    except RocketQError as exc:
        return f"<h2>Controller</h2><p>controllers {esc(addr)}: {esc(exc)}</p>"
    rows = []
    for name, g in groups.items():
        rows.append([name, "-" if g.master_broker_id is None else g.master_broker_id, g.master_address or "-",
                     g.master_epoch, g.sync_state_set_epoch,
                     ", ".join(f"{r.broker_id}@{r.broker_address}" for r in g.in_sync) or "-",
                     ", ".join(f"{r.broker_id}@{r.broker_address}{'' if r.alive else ' (down)'}"
                               for r in g.not_in_sync) or "-"])
    leader = meta.leader_address or "none (an election is under way)"
    headers = ["broker", "master id", "master address", "master epoch", "SyncStateSet epoch", "SyncStateSet",
               "not in sync"]
    intro = f'<p id="controller-leader">Controllers: {esc(addr)}; leader: {esc(leader)}</p>'
    return f"<h2>Controller</h2>{intro}{table(headers, rows, table_id='sync-state-sets')}"
