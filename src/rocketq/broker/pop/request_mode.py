"""How each group consumes each topic: PULL or POP (RocketMQ 5's MessageRequestModeManager).

Set by the admin (SET_MESSAGE_REQUEST_MODE 401, `rocketq admin setConsumeMode`), listed by
GET_ALL_MESSAGE_REQUEST_MODE (402), kept in ``config/messageRequestMode.json`` in Java's layout:
``{"messageRequestModeMap": {topic: {group: {topic, consumerGroup, mode, popShareQueueNum}}}}``.
A group/topic nobody set uses the broker's ``defaultMessageRequestMode``; retry topics are PULL.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.codec.codes import ResponseCode
from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.pop")

MODES = ("PULL", "POP")


class MessageRequestModeManager:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.table: dict[
            str, dict[str, dict[str, Any]]
        ] = {}  # topic -> group -> SetMessageRequestModeRequestBody
        self._writer = ConfigFileWriter(self.path, self.encode)

    @property
    def path(self) -> Path:
        root = Path(self._ctl.store_config.store_path_root_dir).expanduser()
        return root / "config" / "messageRequestMode.json"

    def encode(self) -> bytes:
        return orjson.dumps({"messageRequestModeMap": self.table})

    def load(self) -> None:
        remove_stale_temps(self.path)
        for candidate, data in read_candidates(self.path):
            try:
                table = orjson.loads(data).get("messageRequestModeMap") or {}
                self.table = {t: {g: dict(b) for g, b in groups.items()} for t, groups in table.items()}
                return
            except (ValueError, AttributeError, TypeError) as exc:
                log.warning("load %s failed: %s", candidate, exc)

    def mode(self, topic: str, group: str) -> tuple[str, int]:
        """(mode, popShareQueueNum) of `group` on `topic`."""
        body = self.table.get(topic, {}).get(group)
        if body is not None:
            return str(body.get("mode", "PULL")), int(body.get("popShareQueueNum", 0))
        if topic.startswith("%RETRY%"):
            return "PULL", 0
        return self._ctl.broker_config.default_message_request_mode, 0

    async def set_mode(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """SET_MESSAGE_REQUEST_MODE: the body is a SetMessageRequestModeRequestBody; persisted before
        the answer."""
        try:
            body = orjson.loads(
                bytes(request.body)
                if isinstance(request.body, bytes | bytearray | memoryview)
                else b"".join(request.body)
            )
            topic, group, mode = str(body["topic"]), str(body["consumerGroup"]), str(body.get("mode", "PULL"))
            share = int(body.get("popShareQueueNum", 0))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"bad SetMessageRequestModeRequestBody: {exc}"
            )
        if topic.startswith("%RETRY%"):
            return request.make_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if mode not in MODES:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"mode must be PULL or POP, not {mode}")
        self.table.setdefault(topic, {})[group] = {
            "consumerGroup": group,
            "mode": mode,
            "popShareQueueNum": share,
            "topic": topic,
        }
        await self._writer.write()
        log.info(
            "message request mode of %s on %s set to %s (popShareQueueNum %d)", group, topic, mode, share
        )
        return request.make_response(ResponseCode.SUCCESS)

    def get_all(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_ALL_MESSAGE_REQUEST_MODE: the whole table, as the file holds it."""
        return request.make_response(ResponseCode.SUCCESS, None, None, self.encode())

    async def flush(self) -> None:
        await self._writer.idle()
