"""ConsumerManager / ProducerManager: membership, subscriptions, expiry, close, NOTIFY on changes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rocketq.broker.client_manager import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_PASSIVELY,
    ClientChannelInfo,
    ConsumerManager,
    ProducerManager,
)
from rocketq.broker.filter import build_subscription
from rocketq.codec.codes import RequestCode


class RecordingChannel:
    """Stands in for a client connection: records what the broker pushes to it."""

    def __init__(self, address: str) -> None:
        self.remote_address = address
        self.is_active = True
        self.sent: list[Any] = []
        self.closed = False

    def invoke_oneway(self, cmd: Any) -> None:
        self.sent.append(cmd)

    def close(self) -> None:
        self.closed = True
        self.is_active = False

    def notifications(self) -> list[str]:
        return [c.ext_fields["consumerGroup"] for c in self.sent
                if c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]


def _ctl(**cfg: Any) -> Any:
    defaults = {"channel_expired_timeout": 120_000, "notify_consumer_ids_changed_enable": True}
    defaults.update(cfg)
    return SimpleNamespace(broker_config=SimpleNamespace(**defaults))


def _register(m: ConsumerManager, group: str, ch: RecordingChannel, cid: str, topics: list[str],
              notify: bool = True, model: str = CLUSTERING) -> bool:
    subs = [build_subscription(t, "*") for t in topics]
    return m.register_consumer(group, ClientChannelInfo(ch, cid, 0, 401), CONSUME_PASSIVELY, model,  # type: ignore[arg-type]
                               "CONSUME_FROM_LAST_OFFSET", subs, notify)


def test_first_member_and_second_member_notify_the_group() -> None:
    m = ConsumerManager(_ctl())
    a, b = RecordingChannel("10.0.0.1:1"), RecordingChannel("10.0.0.2:1")
    assert _register(m, "g", a, "a@1", ["t"])
    assert a.notifications() == ["g"]
    assert not _register(m, "g", a, "a@1", ["t"])  # a plain heartbeat changes nothing
    assert a.notifications() == ["g"]
    assert _register(m, "g", b, "b@1", ["t"])
    assert a.notifications() == ["g", "g"]
    assert b.notifications() == ["g"]
    info = m.get_consumer_group_info("g")
    assert info is not None
    assert sorted(info.get_all_client_id()) == ["a@1", "b@1"]
    cmd = a.sent[-1]
    assert cmd.is_oneway


def test_notify_off_per_group_and_per_broker() -> None:
    m = ConsumerManager(_ctl())
    a = RecordingChannel("x:1")
    _register(m, "g", a, "a", ["t"], notify=False)
    assert a.notifications() == []
    m2 = ConsumerManager(_ctl(notify_consumer_ids_changed_enable=False))
    b = RecordingChannel("x:2")
    _register(m2, "g", b, "b", ["t"])
    assert b.notifications() == []


def test_subscription_topic_change_notifies_and_sub_version_updates() -> None:
    m = ConsumerManager(_ctl())
    a = RecordingChannel("x:1")
    _register(m, "g", a, "a", ["t1"])
    assert _register(m, "g", a, "a", ["t1", "t2"])
    assert m.find_subscription_data("g", "t2") is not None
    assert _register(m, "g", a, "a", ["t2"])
    assert m.find_subscription_data("g", "t1") is None
    newer = build_subscription("t2", "tagA", "TAG", 99)
    m.register_consumer("g", ClientChannelInfo(a, "a"), CONSUME_PASSIVELY, CLUSTERING, "x", [newer])  # type: ignore[arg-type]
    sub = m.find_subscription_data("g", "t2")
    assert sub is not None and sub.sub_string == "tagA" and sub.sub_version == 99
    older = build_subscription("t2", "tagB", "TAG", 5)
    m.register_consumer("g", ClientChannelInfo(a, "a"), CONSUME_PASSIVELY, CLUSTERING, "x", [older])  # type: ignore[arg-type]
    sub = m.find_subscription_data("g", "t2")
    assert sub is not None and sub.sub_string == "tagA"


def test_heartbeat_without_subscriptions_keeps_them() -> None:
    m = ConsumerManager(_ctl())
    a = RecordingChannel("x:1")
    _register(m, "g", a, "a", ["t"])
    m.register_consumer("g", ClientChannelInfo(a, "a"), CONSUME_PASSIVELY, CLUSTERING, "x", None)  # type: ignore[arg-type]
    assert m.find_subscription_data("g", "t") is not None


def test_unregister_removes_empty_group_and_notifies_rest() -> None:
    m = ConsumerManager(_ctl())
    a, b = RecordingChannel("x:1"), RecordingChannel("x:2")
    _register(m, "g", a, "a", ["t"])
    _register(m, "g", b, "b", ["t"])
    before = len(a.notifications())
    assert m.unregister_consumer("g", ClientChannelInfo(b, "b"))  # type: ignore[arg-type]
    assert len(a.notifications()) == before + 1
    info = m.get_consumer_group_info("g")
    assert info is not None and info.get_all_client_id() == ["a"]
    m.unregister_consumer("g", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    assert m.get_consumer_group_info("g") is None


def test_channel_close_drops_member_everywhere() -> None:
    m = ConsumerManager(_ctl())
    a, b = RecordingChannel("x:1"), RecordingChannel("x:2")
    _register(m, "g1", a, "a", ["t"])
    _register(m, "g2", a, "a", ["t"])
    _register(m, "g1", b, "b", ["t"])
    before = len(b.notifications())
    m.do_channel_close_event(a)
    assert m.get_consumer_group_info("g2") is None
    info = m.get_consumer_group_info("g1")
    assert info is not None and info.get_all_client_id() == ["b"]
    assert len(b.notifications()) == before + 1
    assert m.query_topic_consume_by_who("t") == {"g1"}


def test_scan_expires_silent_channels() -> None:
    m = ConsumerManager(_ctl(channel_expired_timeout=1000))
    a, b = RecordingChannel("x:1"), RecordingChannel("x:2")
    _register(m, "g", a, "a", ["t"])
    _register(m, "g", b, "b", ["t"])
    info = m.get_consumer_group_info("g")
    assert info is not None
    info.channel_info_table[a].last_update_timestamp -= 5000  # type: ignore[index]
    before = len(b.notifications())
    assert m.scan_not_active_channel() == 1
    assert a.closed
    assert info.get_all_client_id() == ["b"]
    assert len(b.notifications()) == before + 1
    assert m.scan_not_active_channel() == 0
    far_future = info.channel_info_table[b].last_update_timestamp + 10_000  # type: ignore[index]
    assert m.scan_not_active_channel(now_ms=far_future) == 1
    assert m.get_consumer_group_info("g") is None


def test_group_keeps_message_model() -> None:
    m = ConsumerManager(_ctl())
    a = RecordingChannel("x:1")
    _register(m, "g", a, "a", ["t"], model=BROADCASTING)
    info = m.get_consumer_group_info("g")
    assert info is not None and info.message_model == BROADCASTING


def test_broken_channel_does_not_stop_notifications() -> None:
    class Broken(RecordingChannel):
        def invoke_oneway(self, cmd: Any) -> None:
            raise ConnectionError("gone")

    m = ConsumerManager(_ctl())
    bad, good = Broken("x:1"), RecordingChannel("x:2")
    _register(m, "g", bad, "bad", ["t"])
    _register(m, "g", good, "good", ["t"])
    assert good.notifications() == ["g"]


def test_producer_manager_register_close_scan() -> None:
    pm = ProducerManager(_ctl(channel_expired_timeout=1000))
    a, b = RecordingChannel("x:1"), RecordingChannel("x:2")
    pm.register_producer("pg", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    pm.register_producer("pg", ClientChannelInfo(b, "b"))  # type: ignore[arg-type]
    pm.register_producer("CLIENT_INNER_PRODUCER", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    assert pm.group_size() == 2
    assert pm.find_channel("a") is a
    assert pm.get_available_channel("pg") in (a, b)
    pm.do_channel_close_event(a)
    assert pm.find_channel("a") is None
    assert pm.group_size() == 1
    assert pm.get_available_channel("pg") is b
    pm.group_channel_table["pg"][b].last_update_timestamp -= 5000  # type: ignore[index]
    assert pm.scan_not_active_channel() == 1
    assert b.closed and pm.group_size() == 0
    assert pm.get_available_channel("pg") is None


def test_producer_unregister() -> None:
    pm = ProducerManager(_ctl())
    a = RecordingChannel("x:1")
    pm.register_producer("pg", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    pm.unregister_producer("pg", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    assert pm.group_size() == 0 and pm.find_channel("a") is None


def test_a_client_id_stays_findable_while_another_group_of_it_is_registered() -> None:
    # request-reply pushes replies to find_channel(client id); one of the client's producers
    # shutting down must not hide the connection its other producers still use.
    pm = ProducerManager(_ctl())
    a = RecordingChannel("x:1")
    pm.register_producer("requester", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    pm.register_producer("other", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    pm.unregister_producer("other", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    assert pm.find_channel("a") is a
    pm.client_channel_table.clear()  # lost somehow: the next heartbeat brings it back
    pm.register_producer("requester", ClientChannelInfo(a, "a"))  # type: ignore[arg-type]
    assert pm.find_channel("a") is a


def test_rebalance_lock_manager() -> None:
    from rocketq.broker.rebalance_lock import REBALANCE_LOCK_MAX_LIVE_TIME, RebalanceLockManager

    lm = RebalanceLockManager()
    t = 1_000_000
    assert lm.try_lock_batch("g", ["q0", "q1"], "a", now_ms=t) == ["q0", "q1"]
    assert lm.try_lock_batch("g", ["q1", "q2"], "b", now_ms=t + 1) == ["q2"]  # q1 is a's
    assert lm.try_lock_batch("g", ["q0"], "a", now_ms=t + 2) == ["q0"]  # renewing is fine
    assert lm.is_locked("g", "q1", "a", now_ms=t + 3) and not lm.is_locked("g", "q1", "b", now_ms=t + 3)
    assert lm.try_lock_batch("other", ["q1"], "b", now_ms=t) == ["q1"]  # groups are independent
    # a stops renewing q1: after the max live time b may take it.
    later = t + 2 + REBALANCE_LOCK_MAX_LIVE_TIME + 1
    assert lm.try_lock_batch("g", ["q1"], "b", now_ms=later) == ["q1"]
    lm.unlock_batch("g", ["q0", "q1"], "a")  # a no longer holds q1: only q0 goes
    assert lm.try_lock_batch("g", ["q0"], "c", now_ms=later) == ["q0"]
    assert lm.is_locked("g", "q1", "b", now_ms=later)
    assert lm.has_live_locks("g", now_ms=later)
    lm.unlock_batch("g", ["q0"], "c")
    lm.unlock_batch("g", ["q1", "q2"], "b")
    assert not lm.has_live_locks("g", now_ms=later)
    lm.unlock_batch("missing", ["q0"], "a")
