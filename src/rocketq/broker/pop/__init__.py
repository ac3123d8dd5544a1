"""Pop consumption (RocketMQ 5): `PopService` (pop, ack, change-invisible, peek, notification),
the revive log and service, orderly pop and long polling; `PopProcessors` serves them on the wire."""

from rocketq.broker.pop.processor import PopProcessors
from rocketq.broker.pop.service import PopRequest, PopResult, PopService

__all__ = ["PopProcessors", "PopRequest", "PopResult", "PopService"]
