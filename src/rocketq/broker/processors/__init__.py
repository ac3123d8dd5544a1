"""Request processors of the broker and the one table that maps request codes to them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocketq.codec.codes import RequestCode as C
from rocketq.codec.codes import ResponseCode

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.pop import PopProcessors
    from rocketq.broker.processors.admin import AdminBrokerProcessor
    from rocketq.broker.processors.admin_group import AdminGroupProcessor
    from rocketq.broker.processors.client_manage import ClientManageProcessor
    from rocketq.broker.processors.consumer_manage import ConsumerManageProcessor
    from rocketq.broker.processors.end_transaction import EndTransactionProcessor
    from rocketq.broker.processors.pull import PullMessageProcessor
    from rocketq.broker.processors.query import QueryMessageProcessor
    from rocketq.broker.processors.reply import ReplyMessageProcessor
    from rocketq.broker.processors.send import SendMessageProcessor
    from rocketq.codec.command import RemotingCommand


@dataclass(frozen=True, slots=True)
class BrokerProcessors:
    """The processors serving the request table (the controller only reaches `send`, to refresh the
    values it caches after UPDATE_BROKER_CONFIG; processors never reach one another)."""

    send: SendMessageProcessor
    pull: PullMessageProcessor
    query: QueryMessageProcessor
    client_manage: ClientManageProcessor
    consumer_manage: ConsumerManageProcessor
    admin: AdminBrokerProcessor
    admin_group: AdminGroupProcessor
    reply: ReplyMessageProcessor
    end_transaction: EndTransactionProcessor
    pop: PopProcessors | None = None


def register_all(ctl: BrokerController, register: Callable[[int, Any], None]) -> BrokerProcessors:
    """Build every processor and register its handlers; returns the processors.

    This is the one place that says which request codes the broker serves (RocketMQ's
    BrokerController.registerProcessor), and which of the controller's managers a processor
    shares with another (the rebalance locks: LOCK_BATCH_MQ writes them, the send path reads them).
    """
    from rocketq.broker.processors.admin import AdminBrokerProcessor
    from rocketq.broker.processors.admin_group import AdminGroupProcessor
    from rocketq.broker.processors.client_manage import ClientManageProcessor
    from rocketq.broker.processors.consumer_manage import ConsumerManageProcessor
    from rocketq.broker.processors.end_transaction import EndTransactionProcessor
    from rocketq.broker.processors.pull import PullMessageProcessor
    from rocketq.broker.processors.query import QueryMessageProcessor
    from rocketq.broker.processors.reply import ReplyMessageProcessor
    from rocketq.broker.processors.send import SendMessageProcessor

    send = SendMessageProcessor(ctl, ctl.rebalance_lock_manager)
    pull = PullMessageProcessor(ctl)
    query = QueryMessageProcessor(ctl)
    client = ClientManageProcessor(ctl)
    consumer = ConsumerManageProcessor(ctl, ctl.rebalance_lock_manager)
    admin = AdminBrokerProcessor(ctl)
    admin_group = AdminGroupProcessor(ctl)
    reply = ReplyMessageProcessor(ctl)
    end_transaction = EndTransactionProcessor(ctl.transaction_service)
    from rocketq.broker.acl import AclAdminProcessor

    acl = AclAdminProcessor(ctl)
    from rocketq.broker.auth2 import Auth2AdminProcessor

    auth2 = Auth2AdminProcessor(ctl)

    table: list[tuple[int, Any]] = [
        # producers
        (C.SEND_MESSAGE, send.process),
        (C.SEND_MESSAGE_V2, send.process),
        (C.SEND_BATCH_MESSAGE, send.process),
        (C.CONSUMER_SEND_MSG_BACK, send.consumer_send_msg_back),
        (C.END_TRANSACTION, end_transaction.process),
        # request-reply: a replier's answer, pushed to the requester
        (C.SEND_REPLY_MESSAGE, reply.process),
        (C.SEND_REPLY_MESSAGE_V2, reply.process),
        # consumers
        (C.PULL_MESSAGE, pull.process),
        (C.LITE_PULL_MESSAGE, pull.process),
        (C.QUERY_CONSUMER_OFFSET, consumer.query_consumer_offset),
        (C.UPDATE_CONSUMER_OFFSET, consumer.update_consumer_offset),
        (C.GET_CONSUMER_LIST_BY_GROUP, consumer.get_consumer_list_by_group),
        (C.LOCK_BATCH_MQ, consumer.lock_batch_mq),
        (C.UNLOCK_BATCH_MQ, consumer.unlock_batch_mq),
        # clients
        (C.HEART_BEAT, client.heart_beat),
        (C.UNREGISTER_CLIENT, client.unregister_client),
        (C.CHECK_CLIENT_CONFIG, client.check_client_config),
        # queries
        (C.QUERY_MESSAGE, query.query_message),
        (C.VIEW_MESSAGE_BY_ID, query.view_message_by_id),
        (C.QUERY_CONSUME_QUEUE, query.query_consume_queue),
        # admin
        (C.UPDATE_AND_CREATE_TOPIC, admin.update_and_create_topic),
        (C.DELETE_TOPIC_IN_BROKER, admin.delete_topic),
        (C.GET_ALL_TOPIC_CONFIG, admin.get_all_topic_config),
        (C.GET_TOPIC_CONFIG, admin.get_topic_config),
        (C.GET_TOPIC_STATS_INFO, admin.get_topic_stats_info),
        (C.GET_MAX_OFFSET, admin.get_max_offset),
        (C.GET_MIN_OFFSET, admin.get_min_offset),
        (C.SEARCH_OFFSET_BY_TIMESTAMP, admin.search_offset_by_timestamp),
        (C.GET_EARLIEST_MSG_STORETIME, admin.get_earliest_msg_storetime),
        (C.GET_BROKER_RUNTIME_INFO, admin.get_broker_runtime_info),
        (C.GET_BROKER_CONFIG, admin.get_broker_config),
        (C.UPDATE_BROKER_CONFIG, admin.update_broker_config),
        (C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, admin.update_and_create_subscription_group),
        (C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, admin.get_all_subscription_group_config),
        (C.GET_SUBSCRIPTIONGROUP_CONFIG, admin.get_subscription_group_config),
        (C.DELETE_SUBSCRIPTIONGROUP, admin.delete_subscription_group),
        (C.GET_ALL_CONSUMER_OFFSET, admin.get_all_consumer_offset),
        (C.QUERY_TOPIC_CONSUME_BY_WHO, admin.query_topic_consume_by_who),
        (C.GET_CONSUME_STATS, admin.get_consume_stats),
        (C.GET_CONSUMER_CONNECTION_LIST, admin.get_consumer_connection_list),
        (C.GET_PRODUCER_CONNECTION_LIST, admin.get_producer_connection_list),
        (C.GET_BROKER_CONSUME_STATS, admin.get_broker_consume_stats),
        (C.CLEAN_EXPIRED_CONSUMEQUEUE, admin.clean_expired_consume_queue),
        (C.VIEW_BROKER_STATS_DATA, admin.view_broker_stats_data),
        (C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, admin.get_system_topic_list),
        (C.CLEAN_UNUSED_TOPIC, admin.clean_unused_topic),
        (C.DELETE_EXPIRED_COMMITLOG, admin.delete_expired_commit_log),
        (C.GET_ALL_PRODUCER_INFO, admin.get_all_producer_info),
        (C.INVOKE_BROKER_TO_RESET_OFFSET, admin_group.reset_offset),
        (C.CLONE_GROUP_OFFSET, admin_group.clone_group_offset),
        (C.GET_CONSUMER_RUNNING_INFO, admin_group.get_consumer_running_info),
        (C.CONSUME_MESSAGE_DIRECTLY, admin_group.consume_message_directly),
        (C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, admin_group.get_consumer_status),
        # ACL 1.0 administration (broker/acl.py)
        (C.UPDATE_AND_CREATE_ACL_CONFIG, acl.update_and_create_access_config),
        (C.DELETE_ACL_CONFIG, acl.delete_access_config),
        (C.GET_BROKER_CLUSTER_ACL_INFO, acl.get_broker_cluster_acl_info),
        (C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, acl.update_global_white_addrs),
        (C.GET_BROKER_CLUSTER_ACL_CONFIG, acl.get_broker_cluster_acl_config),
        # ACL 2.0 administration (broker/auth2.py)
        (C.AUTH_CREATE_USER, auth2.create_user),
        (C.AUTH_UPDATE_USER, auth2.update_user),
        (C.AUTH_DELETE_USER, auth2.delete_user),
        (C.AUTH_GET_USER, auth2.get_user),
        (C.AUTH_LIST_USER, auth2.list_user),
        (C.AUTH_CREATE_ACL, auth2.create_acl),
        (C.AUTH_UPDATE_ACL, auth2.update_acl),
        (C.AUTH_DELETE_ACL, auth2.delete_acl),
        (C.AUTH_GET_ACL, auth2.get_acl),
        (C.AUTH_LIST_ACL, auth2.list_acl),
    ]
    if ctl.replication is not None:
        table.append((C.GET_BROKER_HA_STATUS, ctl.replication.get_broker_ha_status))
    if ctl.replicas_manager is not None:  # controller mode (broker/ha/controller_mode.py)
        table.append((C.GET_BROKER_EPOCH_CACHE, ctl.replicas_manager.get_epoch_cache))
    schedule = ctl.schedule_service
    if schedule is not None:
        def get_all_delay_offset(request: RemotingCommand, channel: Any) -> RemotingCommand:
            return request.make_response(ResponseCode.SUCCESS, None, None, schedule.encode())

        table.append((C.GET_ALL_DELAY_OFFSET, get_all_delay_offset))
    pop = None
    if ctl.pop_service is not None:
        from rocketq.broker.pop import PopProcessors

        pop = PopProcessors(ctl, ctl.pop_service)
        table += [
            # pop consumers (RocketMQ 5)
            (C.POP_MESSAGE, pop.pop),
            (C.ACK_MESSAGE, pop.ack),
            (C.BATCH_ACK_MESSAGE, pop.batch_ack),
            (C.CHANGE_MESSAGE_INVISIBLETIME, pop.change_invisible_time),
            (C.PEEK_MESSAGE, pop.peek),
            (C.NOTIFICATION, pop.notification),
            (C.POLLING_INFO, pop.polling_info),
            (C.SET_MESSAGE_REQUEST_MODE, ctl.pop_service.request_mode.set_mode),
            (C.GET_ALL_MESSAGE_REQUEST_MODE, ctl.pop_service.request_mode.get_all),
            (C.QUERY_ASSIGNMENT, ctl.pop_service.assignment.query_assignment),
        ]
    # timer messages (RocketMQ 5): recall, checkpoint and metrics
    from rocketq.broker.processors.timer import TimerProcessor

    timer = TimerProcessor(ctl)
    table += [(C.RECALL_MESSAGE, timer.recall_message),
              (C.GET_TIMER_CHECK_POINT, timer.get_timer_check_point),
              (C.GET_TIMER_METRICS, timer.get_timer_metrics)]
    for code, handler in table:
        register(int(code), handler)
    return BrokerProcessors(send, pull, query, client, consumer, admin, admin_group, reply, end_transaction,
                            pop)
