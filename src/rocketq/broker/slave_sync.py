"""SlaveSynchronize: a slave copies its master's tables every 10 s (RocketMQ's SlaveSynchronize).

Topic configs and subscription groups are replaced when the master's data version differs;
consumer offsets are merged over the slave's (as Java's putAll: the master's win); the delay
levels' progress is taken as it is. Each table is then written to the slave's own config files,
so a slave that restarts (or is promoted by hand) starts from them.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

from rocketq.broker.offset_manager import decode_offset_table
from rocketq.codec.bodies import SubscriptionGroupWrapper, TopicConfigSerializeWrapper
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.timer import CheckpointValues
from rocketq.errors import RocketQError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.slave_sync")

SYNC_PERIOD = 10.0
TIMEOUT = 3.0


class SlaveSynchronize:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.master_addr: str | None = None
        self.last_sync_ms = 0

    async def _get(self, code: int) -> bytes:
        assert self.master_addr is not None
        request = RemotingCommand.request(code, {})
        response = await self._ctl.outer_api.client.invoke(self.master_addr, request, TIMEOUT)
        if response.code != ResponseCode.SUCCESS:
            raise RocketQError(f"code {response.code}: {response.remark}", code=response.code)
        return response.body_bytes()

    async def sync_all(self) -> None:
        if not self.master_addr or self.master_addr == self._ctl.address:
            return
        steps = [self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                 self.sync_subscription_group_config]
        if self._ctl.timer_service is not None:  # controller mode: the slave's wheel files timers
            steps.append(self.sync_timer_check_point)
        for step in steps:
            try:
                await step()
            except (RocketQError, OSError, ValueError, TypeError) as exc:
                log.warning("%s from master %s failed: %s", step.__name__, self.master_addr, exc)
        self.last_sync_ms = int(time.time() * 1000)

    async def sync_topic_config(self) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(await self._get(RequestCode.GET_ALL_TOPIC_CONFIG))
        tm = self._ctl.topic_manager
        if wrapper.data_version == tm.data_version:
            return
        tm.replace_all(wrapper.topic_config_table, wrapper.data_version)
        log.info("update slave topic config from master, %s", self.master_addr)

    async def sync_consumer_offset(self) -> None:
        table = decode_offset_table(await self._get(RequestCode.GET_ALL_CONSUMER_OFFSET))
        om = self._ctl.offset_manager
        om.merge_from_master(table)
        await om.persist_async()

    async def sync_delay_offset(self) -> None:
        raw = await self._get(RequestCode.GET_ALL_DELAY_OFFSET)
        schedule = self._ctl.schedule_service
        if schedule is None or not raw:
            return
        table = orjson.loads(raw).get("offsetTable") or {}
        offsets = {int(k): int(v) for k, v in table.items()}
        if offsets != schedule.offset_table:
            schedule.offset_table = offsets
            schedule.persist()

    async def sync_subscription_group_config(self) -> None:
        raw = await self._get(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = SubscriptionGroupWrapper.from_json(raw)
        sm = self._ctl.subscription_manager
        if wrapper.data_version == sm.data_version:
            return
        sm.replace_all(wrapper)
        log.info("update slave subscription group config from master, %s", self.master_addr)

    async def sync_timer_check_point(self) -> None:
        """RocketMQ 5's syncTimerCheckPoint: the master's timer read time, which the slave's wheel
        follows while it does not deliver."""
        timer = self._ctl.timer_service
        if timer is None:
            return
        values = CheckpointValues.decode(await self._get(RequestCode.GET_TIMER_CHECK_POINT))
        timer.follow_master(values.last_read_time_ms)
