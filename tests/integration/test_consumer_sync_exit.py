"""A script using the sync clients ends when its main thread ends (issue 9, item 4).

Each case runs a small script in its own interpreter against a real `rocketq up`: it starts a
sync PushConsumer and a sync Producer, consumes a backlog, and then raises, calls sys.exit(1) or
simply ends, without shutting anything down. The interpreter must exit (it used to hang for
ever on the consume threads), and the clients must have been shut down on the way out: the
consumer's offsets are on the broker although the periodic persist never ran, and the group is
empty.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
from tests.harness import SMALL_STORE, Cluster, module_cluster, run_process, unique_name
from tests.wire import create_topic, get_route, invoke, send_batch, wait_until

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(120)]

QUEUES = 4
MESSAGES = 20

cluster = module_cluster("sync_exit", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)

SCRIPT = textwrap.dedent(
    """
    import logging, sys, threading, time
    import rocketq
    from rocketq.client.consumer import ConsumeStatus

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    namesrv, topic, group, mode, expected = sys.argv[1:6]
    consumed = 0
    lock = threading.Lock()

    def listener(msgs, ctx):
        global consumed
        time.sleep(0.02)  # done after the next pull left, so only a persist stores the offset
        with lock:
            consumed += len(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = rocketq.PushConsumer(
        group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        persist_consumer_offset_interval=600_000,  # only the exit shutdown persists
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    producer = rocketq.Producer(group + "_P", namesrv_addr=namesrv)
    producer.start()
    deadline = time.monotonic() + 60
    while consumed < int(expected) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("consumed", consumed, flush=True)
    if mode == "raise":
        raise RuntimeError("the script failed")
    if mode == "exit":
        sys.exit(1)
    """
)


async def stored_offsets(broker: str, group: str, topic: str) -> list[int]:
    offsets = []
    async with RemotingClient() as rc:
        for qid in range(QUEUES):
            resp = await invoke(
                rc, broker, RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": group, "topic": topic, "queueId": qid},
            )
            ext = resp.fields()
            offsets.append(int(ext.get("offset", -1)) if resp.code == ResponseCode.SUCCESS else -1)
    return offsets


@pytest.mark.parametrize(("mode", "code"), [("raise", 1), ("exit", 1), ("end", 0)])
async def test_a_script_that_stops_stops_and_leaves_its_offsets(
    cluster: Cluster, mode: str, code: int
) -> None:
    topic, group = unique_name("EXIT"), unique_name("EG")
    async with RemotingClient() as rc:
        assert (await create_topic(rc, cluster.broker, topic, read=QUEUES, write=QUEUES)).code == 0
        await wait_until(lambda: get_route(rc, cluster.namesrv, topic), timeout=10)
        for qid in range(QUEUES):
            resp = await send_batch(rc, cluster.broker, topic, [b"m"] * (MESSAGES // QUEUES), queue_id=qid)
            assert resp.code == ResponseCode.SUCCESS
    run = run_process(
        [sys.executable, "-c", SCRIPT, cluster.namesrv, topic, group, mode, str(MESSAGES)],
        timeout=60,
        env=dict(os.environ),
    )
    assert not run.timed_out, f"the interpreter did not exit:\n{run.describe()}"
    assert run.returncode == code, run.describe()
    assert f"consumed {MESSAGES}" in run.stdout, run.describe()
    assert await stored_offsets(cluster.broker, group, topic) == [MESSAGES // QUEUES] * QUEUES
    assert "interpreter exit: shutting down 2 rocketq client(s)" in run.stderr, run.describe()
    async with RemotingClient() as rc:
        resp = await invoke(
            rc, cluster.broker, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
        )
        assert resp.code != ResponseCode.SUCCESS or b"127.0.0.1" not in resp.body_bytes(), "still a member"
