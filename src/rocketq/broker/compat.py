"""``compatibilityMode=4.9``: the broker as strict as an Apache RocketMQ 4.9.8 broker, for tests.

The SDK must work against 4.9 brokers, which know none of what RocketMQ added in 5.0: it may
send a newer request code or header field only once a broker has announced 5.0 or later
(docs/interop.md). With this mode on, the broker

* answers REQUEST_CODE_NOT_SUPPORTED for every request code added after 4.9.8, as 4.9.8 does;
* refuses (SYSTEM_ERROR) a request carrying a header field added after 4.9.8. A real 4.9.8
  broker ignores such a field, which would hide the mistake; refusing it makes a client that
  relies on one fail its tests.

Our broker announces V4_9_4 in every answer (codes.ROCKETQ_VERSION), so a client never learns
that it may use a 5.x feature here, in this mode or not. The mode is for tests: it removes
behaviour and adds none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from rocketq.codec.codes import RequestCode as C
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting.endpoint import handles_runs_of

__all__ = ["ADDED_AFTER_4_9_8", "FIELDS_ADDED_AFTER_4_9_8", "strict_4_9_register"]

# RequestCode.java of rocketmq-all-5.0.0 ... 5.3.3 against rocketmq-all-4.9.8: every code the 5.x
# line has and 4.9.8 does not (pop, static topics, controller/HA, timer, cold data, ACL 2.0, ...).
ADDED_AFTER_4_9_8: Final = frozenset({
    18, 47, 54, 60, 61, 217, 225, 343, 345, 351, 352, 353, 354, 355, 361, 370, 400, 401, 402, 513,
    901, 902, 903, 904, 905, 906, 907, 908,
    1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013,
    2001, 2002, 2003, 2004,
    3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008, 3009, 3010,
    200050, 200051, 200052, 200053, 200054, 200055, 200056, 200151,
})

# 5.x's RpcRequestHeader / TopicRequestHeader members, which most 5.x request headers inherit.
_RPC_FIELDS: Final = frozenset({"ns", "nsd", "bname", "oway", "lo"})
# 4.9.8's RpcRequestHeader already had ``bname``; these requests' headers extend it there, so a
# Java 4.9.8 client may send it (its SendMessageRequestHeaderV2 calls it ``n``).
_BNAME_KNOWN_IN_4_9_8: Final = frozenset({
    C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE, C.PULL_MESSAGE,
    C.QUERY_CONSUMER_OFFSET, C.UPDATE_CONSUMER_OFFSET, C.SEARCH_OFFSET_BY_TIMESTAMP,
    C.GET_MAX_OFFSET, C.GET_MIN_OFFSET, C.GET_EARLIEST_MSG_STORETIME, C.CONSUMER_SEND_MSG_BACK,
    C.END_TRANSACTION,
})
# Header fields added after 4.9.8 to the requests clients send (their header classes compared
# between the two tags); every request is also checked for _RPC_FIELDS.
FIELDS_ADDED_AFTER_4_9_8: Final[Mapping[int, frozenset[str]]] = {
    C.PULL_MESSAGE: frozenset({"maxMsgBytes", "requestSource", "proxyFrowardClientId"}),
    C.QUERY_CONSUMER_OFFSET: frozenset({"setZeroIfNotFound"}),
    C.GET_MAX_OFFSET: frozenset({"committed"}),
    C.SEARCH_OFFSET_BY_TIMESTAMP: frozenset({"boundaryType"}),
    C.VIEW_MESSAGE_BY_ID: frozenset({"topic"}),
}

Handler = Callable[[RemotingCommand, Any], Any]


def _refuse_newer_fields(code: int, handler: Handler) -> Handler:
    rpc = _RPC_FIELDS - {"bname"} if code in _BNAME_KNOWN_IN_4_9_8 else _RPC_FIELDS
    newer = rpc | FIELDS_ADDED_AFTER_4_9_8.get(code, frozenset())

    def checked(request: RemotingCommand, channel: Any) -> Any:
        ext = request.ext_fields
        if ext:
            unknown = sorted(newer.intersection(ext))
            if unknown:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"compatibilityMode 4.9: request {code} carries {', '.join(unknown)}, unknown to "
                    "RocketMQ 4.9.8")
        return handler(request, channel)

    return checked


def strict_4_9_register(register: Callable[[int, Any], None]) -> Callable[[int, Any], None]:
    """``register`` (the server's register_processor) as a 4.9.8 broker's table would have it:
    codes added later are left out (the default processor refuses them), every other handler
    refuses newer header fields. Batch-capable handlers (sends) keep their batch path: the send
    header is the same in 4.9.8 and 5.x."""

    def strict(code: int, handler: Any) -> None:
        if code in ADDED_AFTER_4_9_8:
            return
        register(code, handler if handles_runs_of(handler) else _refuse_newer_fields(code, handler))

    return strict
