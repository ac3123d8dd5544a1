"""ACL on the gRPC endpoint: a grpc.aio interceptor that, when the broker's ACL is on, checks each
call's ``authorization`` header against the accounts remoting uses (plain_acl.yml's 1.0 accounts,
ACL 2.0's users) and asks for the permissions the remoting request of the same action needs.

Each RPC is judged as its remoting twin (``remoting_twin``): SendMessage as SEND_MESSAGE_V2 (PUB
on the topic), ReceiveMessage/Ack/ChangeInvisibleDuration as PULL_MESSAGE (SUB on the topic and the
group), offsets as UPDATE_CONSUMER_OFFSET, so one rule book serves both protocols. A refusal is the
RPC's own response with Code UNAUTHORIZED (who are you) or FORBIDDEN (you may not).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from rocketq.acl import parse_request
from rocketq.acl.errors import AclError
from rocketq.acl.grpc_auth import AUTHORIZATION, DATE_TIME, parse_authorization, verify_grpc_signature
from rocketq.acl.model import PlainAccount
from rocketq.acl.resource import remote_ip
from rocketq.broker.grpc import convert
from rocketq.broker.grpc.clients import producer_group
from rocketq.broker.grpc.protocol import load
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand

if TYPE_CHECKING:
    from rocketq.acl.v2 import User
    from rocketq.broker.acl import AclService
    from rocketq.broker.controller import BrokerController

__all__ = ["AclInterceptor", "authenticate", "authorize", "remoting_twin"]

log = logging.getLogger("rocketq.broker.grpc")

# A code no rule of resource.py or v2.contexts reads: the caller must be known, nothing more.
_KNOWN_ONLY = RequestCode.GET_ROUTEINFO_BY_TOPIC


class Unauthorized(AclError):
    pass


# RPCs whose response has no Status (the Admin service): a refusal is the call's gRPC status.
_NO_STATUS = frozenset({"ChangeLogLevel"})


@dataclass(frozen=True, slots=True)
class _Abort:
    code: grpc.StatusCode
    message: str


def _name(resource: Any, namespace: str) -> str:
    if resource.resource_namespace:
        return convert.namespaced(resource)
    return f"{namespace}%{resource.name}" if namespace else resource.name


def remoting_twin(method: str, request: Any, namespace: str) -> list[RemotingCommand]:
    """The remoting requests whose permissions the RPC ``method`` with ``request`` needs."""
    def cmd(code: int, **fields: str) -> RemotingCommand:
        return RemotingCommand.request(code, fields)

    def consume(code: int, topic: Any, group: Any) -> RemotingCommand:
        return cmd(code, topic=_name(topic, namespace), consumerGroup=_name(group, namespace))

    if method in ("SendMessage", "EndTransaction", "RecallMessage"):
        topics = [m.topic for m in request.messages] if method == "SendMessage" else [request.topic]
        return [cmd(RequestCode.SEND_MESSAGE_V2, b=t, a=producer_group(t))
                for t in {_name(topic, namespace) for topic in topics}]
    if method in ("AckMessage", "ChangeInvisibleDuration", "QueryAssignment"):
        return [consume(RequestCode.PULL_MESSAGE, request.topic, request.group)]
    if method in ("ReceiveMessage", "PullMessage", "GetOffset", "QueryOffset"):
        return [consume(RequestCode.PULL_MESSAGE, request.message_queue.topic, request.group)]
    if method == "UpdateOffset":
        return [consume(RequestCode.UPDATE_CONSUMER_OFFSET, request.message_queue.topic, request.group)]
    if method == "ForwardMessageToDeadLetterQueue":
        return [cmd(RequestCode.CONSUMER_SEND_MSG_BACK, group=_name(request.group, namespace))]
    if method == "ChangeLogLevel":  # the Admin service: what an admin account may do
        return [cmd(RequestCode.UPDATE_BROKER_CONFIG)]
    if method == "Heartbeat" and request.HasField("group") and request.group.name:
        return [cmd(RequestCode.UNREGISTER_CLIENT, consumerGroup=_name(request.group, namespace))]
    return [cmd(_KNOWN_ONLY)]


def authenticate(acl: AclService, md: dict[str, str], ip: str) -> PlainAccount | User | None:
    """Who signed the call: an account, a 2.0 user, or None for a globally white-listed peer (or
    an unverified name when only 5.3's authorization switch is on). ``Unauthorized`` if nobody."""
    try:
        if acl.v1 and any(white(ip) for white in acl.manager.rules.global_white):
            return None
        auth = parse_authorization(md.get(AUTHORIZATION))
        ak = auth.access_key
        account = acl.manager.rules.accounts.get(ak) if acl.v1 else None
        if account is not None:
            if not (account.white_remote_address and account.white(ip)):
                verify_grpc_signature(auth, account.secret_key, md.get(DATE_TIME))
            return account
        user = acl.auth2.rules.users.get(ak)
        if user is None:
            raise AclError(f"No acl config for {ak}" if acl.v1 else f"User:{ak} is not found.")
        if acl.authentication:
            if not user.enabled:
                raise AclError(f"User:{ak} is disabled.")
            verify_grpc_signature(auth, user.password, md.get(DATE_TIME))
        return user
    except AclError as e:
        raise Unauthorized(str(e)) from None


def authorize(acl: AclService, who: PlainAccount | User | None, cmds: list[RemotingCommand], ip: str) -> None:
    """The permission checks of the remoting twins; ``AclError`` (FORBIDDEN) on the first refusal."""
    if who is None or not acl.authorization:
        return
    for cmd in cmds:
        if isinstance(who, PlainAccount):
            acl.manager.rules.authorize(parse_request(cmd, "", ip), who)
        else:
            acl.auth2.rules.authorize(who, cmd, ip)


class AclInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """grpc.aio.ServerInterceptor; does nothing while the broker's ACL is off."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._d, self._s, _ = load()

    def _refusal(self, method: str, exc: AclError) -> Any:
        if method in _NO_STATUS:
            code = grpc.StatusCode.UNAUTHENTICATED if isinstance(exc, Unauthorized) else (
                grpc.StatusCode.PERMISSION_DENIED)
            return _Abort(code, str(exc))
        name = "UNAUTHORIZED" if isinstance(exc, Unauthorized) else "FORBIDDEN"
        status = self._d.Status(code=self._d.Code.Value(name), message=str(exc))
        cls = self._s.TelemetryCommand if method == "Telemetry" else getattr(self._s, f"{method}Response")
        return cls(status=status)

    def _check(self, method: str, request: Any, context: Any) -> Any:
        """None when the call may go on, else the refusal to answer with."""
        acl: AclService | None = getattr(self._ctl, "acl", None)
        if acl is None:
            return None
        md = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        peer = context.peer()
        ip = remote_ip(peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer)
        try:
            who = authenticate(acl, md, ip)
            if request is not None:
                authorize(acl, who, remoting_twin(method, request, md.get("x-mq-namespace", "")), ip)
        except AclError as e:
            # the message names the key and the resource, never the secret
            log.info("gRPC %s from %s refused: %s", method, peer, e)
            return self._refusal(method, e)
        return None

    async def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = await continuation(details)
        # the ACL is built once, at the broker's start: without it the calls are not wrapped at all
        if handler is None or getattr(self._ctl, "acl", None) is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        check = self._check
        opts = {"request_deserializer": handler.request_deserializer,
                "response_serializer": handler.response_serializer}
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: Any) -> Any:
                refusal = check(method, request, context)
                if isinstance(refusal, _Abort):
                    await context.abort(refusal.code, refusal.message)
                return refusal if refusal is not None else await inner_uu(request, context)
            return grpc.unary_unary_rpc_method_handler(unary_unary, **opts)
        if handler.unary_stream is not None:
            stream = self._guarded(method, handler.unary_stream, judged=True)
            return grpc.unary_stream_rpc_method_handler(stream, **opts)
        if handler.stream_stream is not None:
            # Telemetry: the caller must be known; its commands name what later RPCs check
            stream = self._guarded(method, handler.stream_stream, judged=False)
            return grpc.stream_stream_rpc_method_handler(stream, **opts)
        return handler

    def _guarded(self, method: str, inner: Callable[[Any, Any], AsyncIterator[Any]], *,
                 judged: bool) -> Callable[[Any, Any], AsyncIterator[Any]]:
        """A server-streaming handler that answers a refusal as its one response."""
        check = self._check

        async def stream(arg: Any, context: Any) -> AsyncIterator[Any]:
            refusal = check(method, arg if judged else None, context)
            if refusal is not None:
                yield refusal
                return
            async for item in inner(arg, context):
                yield item
        return stream
