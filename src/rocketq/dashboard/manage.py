"""Creating, updating and deleting topics and subscription groups: the forms and what their POSTs do.

Each action returns a notice (HTML, escaped) that the app shows on the page the user lands on. The
app's guard refuses a POST whose Origin is another site, which is what keeps a page elsewhere from
submitting these forms to the dashboard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rocketq.admin import AdminClient
from rocketq.codec.bodies import SubscriptionGroupConfig
from rocketq.dashboard.render import esc
from rocketq.errors import InvalidArgument, SubscriptionGroupNotExist

__all__ = [
    "delete_group",
    "delete_topic",
    "group_forms",
    "new_group_form",
    "new_topic_form",
    "topic_forms",
    "update_group",
    "update_topic",
]

PERMS = (("6", "6 read/write"), ("4", "4 read only"), ("2", "2 write only"))


def _num(form: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = form.get(name, "").strip() or str(default)
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be a whole number: {text!r}") from None
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be between {low} and {high}: {value}")
    return value


def _input(name: str, label: str, value: object, size: int = 6) -> str:
    return f'<label>{esc(label)} <input name="{name}" value="{esc(value)}" size="{size}"></label>'


def _check(name: str, label: str, on: bool) -> str:
    checked = " checked" if on else ""
    return f'<label><input type="checkbox" name="{name}" value="true"{checked}> {esc(label)}</label>'


def _select(name: str, options: list[tuple[str, str]], chosen: str) -> str:
    opts = "".join(
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(t)}</option>' for v, t in options
    )
    return f'<select name="{name}">{opts}</select>'


# -- topics -----------------------------------------------------------------------------------------------


def _topic_fields(clusters: list[str], cluster: str, read: int, write: int, perm: int, order: bool) -> str:
    return (
        "<label>cluster " + _select("cluster", [(c, c) for c in clusters], cluster) + "</label>"
        + _input("readQueueNums", "read queues", read) + _input("writeQueueNums", "write queues", write)
        + "<label>perm " + _select("perm", list(PERMS), str(perm)) + "</label>"
        + _check("order", "ordered", order)
    )


def new_topic_form(clusters: list[str]) -> str:
    return (
        '<h2>Create a topic</h2><form method="post" action="/topic/update" id="create-topic">'
        + _input("topic", "topic", "", 24)
        + _topic_fields(clusters, clusters[0] if clusters else "", 8, 8, 6, False)
        + '<button type="submit">Create</button></form>'
    )


def topic_forms(topic: str, clusters: list[str], read: int, write: int, perm: int) -> str:
    """The topic page's update form (prefilled from its route) and its delete form."""
    name = f'<input type="hidden" name="topic" value="{esc(topic)}">'
    return (
        '<h2>Update</h2><form method="post" action="/topic/update" id="update-topic">' + name
        + _topic_fields(clusters, clusters[0] if clusters else "", read, write, perm, False)
        + '<button type="submit">Update</button></form>'
        + '<h2>Delete</h2><form method="post" action="/topic/delete" id="delete-topic">' + name
        + '<label><input type="checkbox" name="confirm" value="true" required> '
        + "delete it from every broker and name server (its messages are no longer readable)</label> "
        + '<button type="submit">Delete</button></form>'
    )


async def update_topic(admin: AdminClient, form: Mapping[str, str]) -> tuple[str, str]:
    """``updateTopic`` on every master of the chosen cluster: (topic, notice)."""
    topic, cluster = form.get("topic", "").strip(), form.get("cluster", "")
    if not topic:
        raise InvalidArgument("no topic name given")
    read = _num(form, "readQueueNums", 8, 1, 1024)
    write = _num(form, "writeQueueNums", 8, 1, 1024)
    perm = _num(form, "perm", 6, 0, 7)
    addrs = await admin.create_topic(
        topic, cluster=cluster, read_queue_nums=read, write_queue_nums=write, perm=perm,
        order=form.get("order") == "true",
    )
    notice = (
        f'<p class="ok" id="topic-done">Topic {esc(topic)} created/updated on {esc(", ".join(addrs))}: '
        f"{read} read / {write} write queues, perm {perm}</p>"
    )
    return topic, notice


async def delete_topic(admin: AdminClient, form: Mapping[str, str]) -> str:
    topic = form.get("topic", "")
    if not topic or form.get("confirm") != "true":
        raise InvalidArgument("deleting a topic needs its name and the confirm box ticked")
    clusters = await admin.get_topic_cluster_list(topic)
    addrs = [a for c in clusters for a in await admin.delete_topic(topic, c)]
    return f'<p class="ok" id="topic-done">Topic {esc(topic)} deleted from {esc(", ".join(addrs))}</p>'


# -- subscription groups ----------------------------------------------------------------------------------


def _group_fields(c: SubscriptionGroupConfig) -> str:
    return (
        _check("consumeEnable", "consume enabled", c.consume_enable)
        + _check("consumeBroadcastEnable", "broadcast allowed", c.consume_broadcast_enable)
        + _check("consumeMessageOrderly", "orderly", c.consume_message_orderly)
        + _input("retryQueueNums", "retry queues", c.retry_queue_nums)
        + _input("retryMaxTimes", "retry max times", c.retry_max_times)
    )


def new_group_form() -> str:
    return (
        '<h2>Create a subscription group</h2><form method="post" action="/group/update" id="create-group">'
        + _input("group", "group", "", 24) + _group_fields(SubscriptionGroupConfig(""))
        + '<input type="hidden" name="create" value="true">'
        + '<button type="submit">Create</button></form>'
    )


def group_forms(group: str, config: SubscriptionGroupConfig | None) -> str:
    name = f'<input type="hidden" name="group" value="{esc(group)}">'
    return (
        '<h2>Subscription group config</h2><form method="post" action="/group/update" id="update-group">'
        + name + _group_fields(config or SubscriptionGroupConfig(group))
        + '<button type="submit">Update</button></form>'
        + '<h2>Delete</h2><form method="post" action="/group/delete" id="delete-group">' + name
        + _check("cleanOffset", "also remove its offsets", False) + " "
        + '<label><input type="checkbox" name="confirm" value="true" required> delete it from every broker'
        + '</label> <button type="submit">Delete</button></form>'
    )


async def group_config(admin: AdminClient, group: str) -> SubscriptionGroupConfig | None:
    """The group's config on the first master that has it."""
    for addr in (await admin.master_addrs()).values():
        found = (await admin.get_all_subscription_group(addr)).get(group)
        if found is not None:
            return found
    return None


async def update_group(admin: AdminClient, form: Mapping[str, str]) -> tuple[str, str]:
    """``updateSubGroup`` on every master: the fields the form has, the rest kept as they were."""
    group = form.get("group", "").strip()
    if not group:
        raise InvalidArgument("no group name given")
    base = await group_config(admin, group) or SubscriptionGroupConfig(group)
    config = dataclasses.replace(
        base,
        consume_enable=form.get("consumeEnable") == "true",
        consume_broadcast_enable=form.get("consumeBroadcastEnable") == "true",
        consume_message_orderly=form.get("consumeMessageOrderly") == "true",
        retry_queue_nums=_num(form, "retryQueueNums", base.retry_queue_nums, 0, 1024),
        retry_max_times=_num(form, "retryMaxTimes", base.retry_max_times, -1, 1000),
    )
    addrs = list((await admin.master_addrs()).values())
    for addr in addrs:
        await admin.create_and_update_subscription_group_config(addr, config)
    verb = "created" if form.get("create") == "true" else "updated"
    return group, f'<p class="ok" id="group-done">Group {esc(group)} {verb} on {esc(", ".join(addrs))}</p>'


async def delete_group(admin: AdminClient, form: Mapping[str, str]) -> str:
    group = form.get("group", "")
    if not group or form.get("confirm") != "true":
        raise InvalidArgument("deleting a group needs its name and the confirm box ticked")
    if await group_config(admin, group) is None:
        raise SubscriptionGroupNotExist(f"No subscription group {group!r} on any broker")
    addrs = list((await admin.master_addrs()).values())
    for addr in addrs:
        await admin.delete_subscription_group(addr, group, form.get("cleanOffset") == "true")
    return f'<p class="ok" id="group-done">Group {esc(group)} deleted from {esc(", ".join(addrs))}</p>'
