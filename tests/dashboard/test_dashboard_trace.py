"""The message trace view (/trace) in headless Chromium: a traced send and its traced consumption
(one failed delivery, then a retry that succeeds) shown as the message's life."""

from __future__ import annotations

import threading
import time
from typing import Any

from rocketq import ConsumeStatus, Message, Producer, PushConsumer
from rocketq.client.consumer import ConsumeFromWhere
from rocketq.testing import RocketQCluster

Dashboard = Any  # tests/dashboard/conftest.py's Dashboard


def _wait(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not met within {timeout} s: {check}"
        time.sleep(0.2)


def test_trace_view_shows_send_and_each_delivery(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    cluster.create_topic("DashTrace", queues=1)
    done = threading.Event()
    deliveries: list[int] = []

    def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
        deliveries.append(msgs[0].reconsume_times)
        if msgs[0].reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER  # the first delivery fails: a retry follows
        done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    with Producer("DashTraceP", namesrv_addr=cluster.namesrv_addr, enable_trace=True) as producer:
        sent = producer.send(Message("DashTrace", b"<b>traced</b>", tags="<i>t</i>", keys="trace-key"))
    consumer = PushConsumer("DashTraceC", namesrv_addr=cluster.namesrv_addr, enable_trace=True,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("DashTrace", "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        assert done.wait(120), f"deliveries so far: {deliveries}"
        url = f"{dashboard.url}/trace?id={sent.msg_id}"

        def complete() -> bool:
            page.goto(url)
            return page.locator("#trace-consume tr").count() >= 3 and "in progress" not in page.content()

        _wait(complete)
    finally:
        consumer.shutdown()
    send_row = page.locator("#trace-send tr").nth(1).inner_text()
    assert "DashTraceP" in send_row and "success" in send_row and "DashTrace" in send_row
    assert "<i>t</i>" in send_row  # shown as text, not markup
    assert page.locator("main i").count() == 0
    rows = [page.locator("#trace-consume tr").nth(i).inner_text() for i in (1, 2)]
    assert all("DashTraceC" in r for r in rows)
    assert sorted(r.split("\t")[3] for r in rows) == ["0", "1"]  # the retry count of each delivery
    assert sorted(r.split("\t")[5] for r in rows) == ["failed", "success"]

    # reached from the message page too, and the form finds the same trace
    page.goto(f"{dashboard.url}/messages?id={sent.msg_id}&topic=DashTrace")
    page.locator(".trace-link a").click()
    page.wait_for_selector("#trace-send")
    page.goto(dashboard.url + "/trace")
    page.locator("#trace-form input[name=id]").fill("0A0000000000000000000000DEADBEEF")
    page.locator("#trace-form button").click()
    assert "No trace of" in page.locator("#trace-count").inner_text()
