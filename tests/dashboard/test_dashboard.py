"""The dashboard end to end: a real cluster, the ``rocketq dashboard`` process, headless Chromium."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from rocketq import ConsumeStatus, Message, Producer, PushConsumer
from rocketq.client.consumer import ConsumeFromWhere
from rocketq.codec.bodies import SubscriptionGroupConfig
from rocketq.testing import RocketQCluster

Dashboard = Any  # tests/dashboard/conftest.py's Dashboard: url, host, port, proc

SCRIPT_BODY = "<script>alert(1)</script>"
# Only '%', '|', letters, digits, '_' and '-' are legal in a topic: percent-escapes are how
# HTML-ish text gets in, and a dashboard that URL-decodes a name twice would show '<b>'.
HTML_TOPIC = "Q%3Cb%3Ebold%3C%2Fb%3E|%22x"


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc shows them) of the sockets listening on ``port``."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(name)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            addr, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":
                out.append(addr)
    return out


def test_binds_loopback_only(dashboard: Dashboard) -> None:
    assert dashboard.host == "127.0.0.1"
    assert _listening(dashboard.port) == ["0100007F"]


def test_overview_lists_the_broker(page: Any, dashboard: Dashboard, cluster: RocketQCluster) -> None:
    page.goto(dashboard.url + "/")
    brokers = page.locator("#brokers")
    assert cluster.broker_name in brokers.inner_text()
    row = brokers.locator("tbody tr", has_text=cluster.broker_addr)
    assert row.count() == 1
    assert "UP" in row.inner_text() and cluster.cluster_name in row.inner_text()


def test_created_topic_is_shown_with_its_queues(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    cluster.create_topic("DashTopicA", queues=3)
    page.goto(dashboard.url + "/topics")
    page.get_by_role("link", name="DashTopicA", exact=True).click()
    assert page.locator("#topic-name").inner_text() == "DashTopicA"
    assert page.locator("#queues tbody tr").count() == 3
    assert cluster.broker_name in page.locator("#route").inner_text()


def _send_from_topic_page(page: Any, dashboard: Dashboard, topic: str, keys: str, body: str) -> str:
    page.goto(dashboard.url + "/topics")
    page.get_by_role("link", name=topic, exact=True).click()
    form = page.locator("#send-form")
    form.locator("input[name=tags]").fill("TagA")
    form.locator("input[name=keys]").fill(keys)
    form.locator("textarea[name=body]").fill(body)
    form.locator("button").click()
    sent = page.locator("#sent")
    assert "SEND_OK" in sent.inner_text()
    assert page.locator("#topic-name").inner_text() == topic
    return str(sent.locator("code").inner_text())


def _assert_body_shown_as_text(page: Any, body: str) -> None:
    assert page.locator("#result-count").inner_text() == "1 message(s)"
    assert page.locator("pre.body").inner_text() == body
    assert page.locator("main script, main img").count() == 0


def test_message_sent_then_found_by_key_and_id_escaped(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    cluster.create_topic("DashMsg", queues=2)
    msg_id = _send_from_topic_page(page, dashboard, "DashMsg", "order-77", SCRIPT_BODY)

    page.goto(dashboard.url + "/messages")
    form = page.locator("#by-key")
    form.locator("input[name=topic]").fill("DashMsg")
    form.locator("input[name=key]").fill("order-77")
    form.locator("button").click()
    _assert_body_shown_as_text(page, SCRIPT_BODY)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.content()

    form = page.locator("#by-id")
    form.locator("input[name=id]").fill(msg_id)
    form.locator("input[name=topic]").fill("DashMsg")
    form.locator("button").click()
    _assert_body_shown_as_text(page, SCRIPT_BODY)
    assert msg_id in page.locator("section.message").inner_text()

    form = page.locator("#by-time")
    form.locator("input[name=topic]").fill("DashMsg")
    form.locator("input[name=begin]").fill("0")
    form.locator("input[name=end]").fill("now")
    form.locator("button").click()
    _assert_body_shown_as_text(page, SCRIPT_BODY)


def test_html_ish_topic_key_and_body_are_shown_literally(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    cluster.create_topic(HTML_TOPIC, queues=1)
    body = '<img src=x onerror="alert(2)"><b>bold</b>'
    _send_from_topic_page(page, dashboard, HTML_TOPIC, "<b>k</b>", body)
    assert page.locator("main b", has_text="bold").count() == 0

    page.goto(dashboard.url + "/messages")
    form = page.locator("#by-key")
    form.locator("input[name=topic]").fill(HTML_TOPIC)
    form.locator("input[name=key]").fill("<b>k</b>")
    form.locator("button").click()
    _assert_body_shown_as_text(page, body)
    assert page.locator("section.message").get_by_text(HTML_TOPIC, exact=True).count() == 1


def test_group_lag_goes_down_while_a_consumer_runs(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    topic, group, total = "DashLag", "DashLagGroup", 120
    cluster.create_topic(topic, queues=2)
    with Producer("dash_lag_pg", namesrv_addr=cluster.namesrv_addr) as producer:
        for i in range(total):
            producer.send(Message(topic, f"m{i}".encode()))
    cluster.admin().create_and_update_subscription_group_config(
        cluster.broker_addr, SubscriptionGroupConfig(group)
    )

    # the group has no offsets yet: the reset form puts it at the start of the topic
    page.goto(dashboard.url + f"/group?name={group}")
    form = page.locator("#reset-form")
    form.locator("input[name=topic]").fill(topic)
    form.locator("input[name=time]").fill("0")
    form.locator("button").click()
    assert "Reset" in page.locator("#reset-done").inner_text()
    assert page.locator("#total-lag").inner_text() == str(total)
    page.wait_for_function(f"document.getElementById('live-lag').textContent === '{total}'")

    lock = threading.Lock()

    def slow(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        with lock:  # one message at a time: the lag has to be seen falling, not just gone
            time.sleep(0.04 * len(msgs))
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv_addr=cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        # a small window makes every pull carry the committed offset (persisting starts only after 10 s)
        pull_threshold_for_queue=4, pull_batch_size=4,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(slow)
    consumer.start()
    seen: list[int] = []
    tps_seen: list[float] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lag = int(page.locator("#live-lag").inner_text())
            if not seen or seen[-1] != lag:
                seen.append(lag)
            tps_seen.append(float(page.locator("#live-tps").inner_text()))
            if lag == 0:
                break
            time.sleep(0.25)
    finally:
        consumer.shutdown()
    assert seen[0] == total and seen[-1] == 0, seen
    assert any(0 < v < total for v in seen), f"lag never seen between {total} and 0: {seen}"
    assert seen == sorted(seen, reverse=True), seen
    assert max(tps_seen) > 0
    assert int(page.locator("#live-polls").inner_text()) >= 3

    page.goto(dashboard.url + "/groups")
    row = page.locator("#groups tbody tr", has_text=group)
    assert row.locator("td").nth(1).inner_text() == "0"


def _http(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_cross_site_post_and_foreign_host_are_refused(dashboard: Dashboard) -> None:
    form = urllib.parse.urlencode({"topic": "DashMsg", "body": "x"}).encode()
    status, _ = _http(dashboard.url + "/send", data=form, headers={"Origin": "http://evil.example"})
    assert status == 403
    status, _ = _http(dashboard.url + "/", headers={"Host": "evil.example"})
    assert status == 421


def test_unknown_topic_is_an_escaped_error_box(page: Any, dashboard: Dashboard) -> None:
    response = page.goto(dashboard.url + "/topic?name=" + urllib.parse.quote("No%3Cb%3ESuchTopic", safe=""))
    assert response.status >= 400
    error = page.locator("#error")
    assert "TopicNotExist" in error.inner_text() or "No%3Cb%3ESuchTopic" in error.inner_text()
    assert page.locator("main b").count() == 0


def test_group_json_endpoint(dashboard: Dashboard) -> None:
    status, text = _http(dashboard.url + "/api/group?name=DashLagGroup")
    assert status == 200
    data = json.loads(text)
    assert data["group"] == "DashLagGroup" and data["lag"] == 0 and data["consumed"] >= 120
    assert {q["topic"] for q in data["queues"]} >= {"DashLag"}


def test_unknown_topic_and_group_are_404_pages(page: Any, dashboard: Dashboard) -> None:
    response = page.goto(dashboard.url + "/topic?name=NoSuchDashTopic")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Not found"
    assert "No topic 'NoSuchDashTopic'" in page.locator("#error").inner_text()
    page.locator("#back a").click()
    assert page.url.endswith("/topics")

    response = page.goto(dashboard.url + "/group?name=" + urllib.parse.quote("NoSuch<i>Group</i>", safe=""))
    assert response.status == 404
    assert "No consumer group 'NoSuch<i>Group</i>'" in page.locator("#error").inner_text()
    assert page.locator("main i").count() == 0
    assert page.locator("#back a").get_attribute("href") == "/groups"
    status, text = _http(dashboard.url + "/api/group?name=NoSuchDashGroup")
    assert status == 404 and "NoSuchDashGroup" in json.loads(text)["error"]


def test_time_search_without_a_range_says_so(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    cluster.create_topic("DashNoRange", queues=1)
    page.goto(dashboard.url + "/messages")
    form = page.locator("#by-time")
    form.locator("input[name=topic]").fill("DashNoRange")
    form.locator("button").click()
    assert "a time search needs a range" in page.locator("#error").inner_text()

    form = page.locator("#by-time")
    form.locator("input[name=topic]").fill("DashNoRange")
    form.locator("input[name=begin]").fill("now")
    form.locator("input[name=end]").fill("0")
    form.locator("button").click()
    assert "the time range is empty" in page.locator("#error").inner_text()


def test_tps_cells_show_labelled_windows(page: Any, dashboard: Dashboard, cluster: RocketQCluster) -> None:
    topic = "DashTps"
    cluster.create_topic(topic, queues=2)
    with Producer("dash_tps_pg", namesrv_addr=cluster.namesrv_addr) as producer:
        for i in range(30):
            producer.send(Message(topic, f"t{i}".encode()))
    page.goto(dashboard.url + "/")
    headers = page.locator("#brokers thead").inner_text()
    assert "produce TPS (10 s; 1 min, 10 min)" in headers
    row = page.locator("#brokers tbody tr", has_text=cluster.broker_addr)
    first = row.locator("span.tps").first
    float(first.inner_text())  # a number, not the raw "a b c" string
    assert first.get_attribute("title") == "average over the last 10 s"
    longer = row.locator("small.tps-longer").first.inner_text()
    assert longer.startswith("(1 min ") and ", 10 min " in longer

    page.goto(dashboard.url + f"/topic?name={topic}")
    traffic = page.locator("#topic-tps tbody tr", has_text=cluster.broker_name)
    assert traffic.count() == 1
    assert int(traffic.locator("td").nth(3).inner_text()) == 30


def test_producer_group_page_lists_its_connections(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    topic, group = "DashProd", "dash_producer_pg"
    cluster.create_topic(topic, queues=1)
    with Producer(group, namesrv_addr=cluster.namesrv_addr) as producer:
        producer.send(Message(topic, b"p"))
        # the broker learns of a producer from its heartbeat, sent soon after the first send
        link = page.get_by_role("link", name=group, exact=True)
        deadline = time.monotonic() + 30
        while True:
            page.goto(dashboard.url + "/producers")
            if link.count() == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        link.click()
        assert page.locator("#producer-name").inner_text() == group
        rows = page.locator("#producer-clients tbody tr")
        assert rows.count() == 1
        cells = rows.first.locator("td")
        assert cells.nth(1).inner_text().startswith("127.0.0.1:")
        assert cells.nth(4).inner_text() == cluster.broker_name

    response = page.goto(dashboard.url + "/producer?name=no_such_dash_pg")
    assert response.status == 404
    assert "No producer of group 'no_such_dash_pg'" in page.locator("#error").inner_text()
    assert page.locator("#back a").get_attribute("href") == "/producers"


def test_broker_config_read_and_runtime_update(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    page.goto(dashboard.url + "/")
    page.get_by_role("link", name=cluster.broker_addr, exact=True).click()
    assert page.locator("#broker-name").inner_text() == cluster.broker_name
    assert "rmq_sys_wheel_timer" in page.locator("#timer-state").inner_text()  # timer messages are on
    config = page.locator("#broker-config")
    row = config.locator("tbody tr", has_text="brokerClusterName")
    assert cluster.cluster_name in row.inner_text()

    form = page.locator("#config-form")
    form.locator("input[name=key]").fill("registerBrokerTimeoutMills")
    form.locator("input[name=value]").fill("25000")
    form.locator("button").click()
    assert "the broker now reports 25000" in page.locator("#config-done").inner_text()
    assert cluster.admin().get_broker_config(cluster.broker_addr)["registerBrokerTimeoutMills"] == "25000"

    form = page.locator("#config-form")
    form.locator("input[name=key]").fill("brokerClusterName")
    form.locator("input[name=value]").fill("Other")
    form.locator("button").click()
    refused = page.locator("#error").inner_text()
    assert refused.startswith("Not updated:") and "restart" in refused
    assert cluster.admin().get_broker_config(cluster.broker_addr)["brokerClusterName"] == cluster.cluster_name

    response = page.goto(dashboard.url + "/broker?addr=10.255.255.1:10911")
    assert response.status == 404


def test_topic_create_update_delete(page: Any, dashboard: Dashboard, cluster: RocketQCluster) -> None:
    topic = "DashCrudTopic"
    page.goto(dashboard.url + "/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=topic]").fill(topic)
    form.locator("input[name=readQueueNums]").fill("4")
    form.locator("input[name=writeQueueNums]").fill("4")
    form.locator("button").click()
    assert "created/updated" in page.locator("#topic-done").inner_text()
    assert page.locator("#topic-name").inner_text() == topic
    assert page.locator("#queues tbody tr").count() == 4

    form = page.locator("#update-topic")
    form.locator("input[name=readQueueNums]").fill("2")
    form.locator("input[name=writeQueueNums]").fill("2")
    form.locator("select[name=perm]").select_option("4")
    form.locator("button").click()
    cells = page.locator("#route tbody tr").first.locator("td")
    assert [cells.nth(i).inner_text() for i in (2, 3, 4)] == ["2", "2", "4"]

    # a cross-site form cannot delete it
    data = urllib.parse.urlencode({"topic": topic, "confirm": "true"}).encode()
    status, _ = _http(dashboard.url + "/topic/delete", data=data, headers={"Origin": "http://evil.example"})
    assert status == 403

    page.locator("#delete-topic input[name=confirm]").check()
    page.locator("#delete-topic button").click()
    assert "deleted" in page.locator("#topic-done").inner_text()
    assert page.locator("#topics").get_by_role("link", name=topic, exact=True).count() == 0
    assert page.goto(dashboard.url + f"/topic?name={topic}").status == 404


def test_subscription_group_create_update_delete(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    group = "DashCrudGroup"
    admin = cluster.admin()
    page.goto(dashboard.url + "/groups")
    form = page.locator("#create-group")
    form.locator("input[name=group]").fill(group)
    form.locator("input[name=retryMaxTimes]").fill("5")
    form.locator("button").click()
    assert "created" in page.locator("#group-done").inner_text()
    assert page.locator("#group-name").inner_text() == group
    config = admin.get_all_subscription_group(cluster.broker_addr)[group]
    assert config.retry_max_times == 5 and config.consume_enable

    form = page.locator("#update-group")
    assert form.locator("input[name=retryMaxTimes]").input_value() == "5"
    form.locator("input[name=consumeEnable]").uncheck()
    form.locator("button").click()
    assert "updated" in page.locator("#group-done").inner_text()
    config = admin.get_all_subscription_group(cluster.broker_addr)[group]
    assert not config.consume_enable and config.retry_max_times == 5

    page.locator("#delete-group input[name=confirm]").check()
    page.locator("#delete-group button").click()
    assert "deleted" in page.locator("#group-done").inner_text()
    assert group not in admin.get_all_subscription_group(cluster.broker_addr)
    assert page.goto(dashboard.url + f"/group?name={group}").status == 404


def _recording_consumer(
    cluster: RocketQCluster, group: str, topic: str, failing: threading.Event, **options: Any
) -> tuple[PushConsumer, list[bytes]]:
    """A started consumer of ``topic`` from its start that records every body it is given and
    asks for a retry while ``failing`` is set."""
    bodies: list[bytes] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        bodies.extend(m.body for m in msgs)
        return ConsumeStatus.RECONSUME_LATER if failing.is_set() else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv_addr=cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **options,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    return consumer, bodies


def test_dead_letters_listed_resent_and_consumed_directly(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    topic, group = "DashDlqTopic", "DashDlqGroup"
    cluster.create_topic(topic, queues=1)
    failing = threading.Event()
    failing.set()
    # max_reconsume_times=0: the first failure is final, straight to %DLQ%group
    consumer, bodies = _recording_consumer(cluster, group, topic, failing, max_reconsume_times=0)
    try:
        with Producer("dash_dlq_pg", namesrv_addr=cluster.namesrv_addr) as producer:
            producer.send(Message(topic, b"<dead>", keys="dead-1"))
        deadline = time.monotonic() + 30
        while True:
            response = page.goto(dashboard.url + f"/dlq?group={group}")
            if response.status == 200 and page.locator("#dlq tbody tr").count() == 1:
                break
            assert time.monotonic() < deadline, "the message never reached the DLQ"
            time.sleep(0.5)
        row = page.locator("#dlq tbody tr").first
        assert topic in row.inner_text() and "<dead>" in row.inner_text()
        failing.clear()
        before = len(bodies)

        row.locator("form.consume button").click()
        assert "CR_SUCCESS" in page.locator("#consume-done").inner_text()
        assert len(bodies) > before and bodies[-1] == b"<dead>"

        page.locator("#dlq tbody tr").first.locator("form.resend button").click()
        done = page.locator("#dlq-done").inner_text()
        assert f"to {topic}: SEND_OK" in done
        deadline = time.monotonic() + 30
        while bodies.count(b"<dead>") < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert bodies.count(b"<dead>") == 3  # first try, consume-directly, the resent copy
    finally:
        consumer.shutdown()
    assert page.goto(dashboard.url + "/dlq?group=NoDeadLettersGroup").status == 404


def _series(page: Any, name: str) -> float:
    text = page.locator(f'[data-series="{name}"]').inner_text()
    return -1.0 if text == "-" else float(text)


def test_tps_history_charts_on_cluster_and_topic_pages(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    topic = "DashTpsChart"
    cluster.create_topic(topic, queues=2)
    page.goto(dashboard.url + "/")
    put = f"{cluster.broker_name} put"
    page.wait_for_function("Number(document.getElementById('tps-polls').textContent) >= 1")
    assert _series(page, put) >= 0 and _series(page, f"{cluster.broker_name} get") >= 0

    tab = page.context.new_page()
    tab_errors: list[str] = []
    tab.on("pageerror", lambda e: tab_errors.append(str(e)))
    try:
        tab.goto(dashboard.url + f"/topic?name={topic}")
        seen_topic: list[float] = []
        seen_cluster: list[float] = []
        with Producer("dash_tps_chart_pg", namesrv_addr=cluster.namesrv_addr) as producer:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (seen_topic and max(seen_topic) > 0
                                                       and max(seen_cluster) > 0):
                for i in range(20):
                    producer.send(Message(topic, f"c{i}".encode()))
                seen_topic.append(_series(tab, "put"))
                seen_cluster.append(_series(page, put))
                time.sleep(0.2)
        assert max(seen_topic) > 0, seen_topic
        assert max(seen_cluster) > 0, seen_cluster
        assert int(tab.locator("#tps-polls").inner_text()) >= 2
    finally:
        tab.close()
    assert not tab_errors, tab_errors
    status, text = _http(dashboard.url + "/api/topic?name=" + topic)
    assert status == 200 and json.loads(text)["counters"]["put"] > 0


def test_message_consumed_directly_by_an_online_client(
    page: Any, dashboard: Dashboard, cluster: RocketQCluster
) -> None:
    topic, group = "DashDirect", "DashDirectGroup"
    cluster.create_topic(topic, queues=1)
    consumer, bodies = _recording_consumer(cluster, group, topic, threading.Event())
    try:
        with Producer("dash_direct_pg", namesrv_addr=cluster.namesrv_addr) as producer:
            uniq_key = producer.send(Message(topic, b"direct-me", keys="direct-1")).msg_id
        deadline = time.monotonic() + 30
        while b"direct-me" not in bodies:
            assert time.monotonic() < deadline, "the consumer never got the message"
            time.sleep(0.2)
        form = page.locator("form.consume", has_text=group)
        while True:  # the group shows as online once the consumer's heartbeat reached the broker
            page.goto(dashboard.url + f"/messages?topic={topic}&key=direct-1")
            if form.count() == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        client = form.locator("select option").first.get_attribute("value")
        form.locator("button").click()
        assert "CR_SUCCESS" in page.locator("#consume-done").inner_text()
        assert bodies.count(b"direct-me") == 2
        assert page.locator("pre.body").inner_text() == "direct-me"
        # the admin call itself takes the unique key as well (it also decodes as an offset msgId)
        result = cluster.admin().consume_message_directly(group, client, topic, uniq_key)
        assert result["consumeResult"] == "CR_SUCCESS"
        assert bodies.count(b"direct-me") == 3
    finally:
        consumer.shutdown()


def test_group_page_shows_pop_state(page: Any, dashboard: Dashboard, cluster: RocketQCluster) -> None:
    from tests.wire import pop, popped, send_message

    from rocketq.remoting import RemotingClient

    topic, group = "DashPop", "dash_pop_g"
    cluster.create_topic(topic, queues=1)

    async def pop_two_of_three() -> None:
        async with RemotingClient() as client:
            for i in range(3):
                sent = await send_message(client, cluster.broker_addr, topic, b"%d" % i, queue_id=0)
                assert sent.code == 0
            response = await pop(client, cluster.broker_addr, group, topic, max_nums=2, invisible_ms=60_000)
            assert len(popped(response, cluster.broker_name)) == 2

    cluster.run(pop_two_of_three())  # on the cluster's loop: Playwright's sync API owns this thread
    page.goto(dashboard.url + f"/group?name={group}")
    assert page.locator("#pop-inflight").inner_text() == "2"
    assert page.locator("#pop-revive").inner_text() == "0"  # invisible for a minute yet
    headers = page.locator("#progress thead th").all_inner_texts()
    row = page.locator("#progress tbody tr", has_text=topic)
    cells = dict(zip(headers, row.locator("td").all_inner_texts(), strict=True))
    assert (cells["lag"], cells["in flight"], cells["to revive"]) == ("3", "2", "0")
