"""The rest of Apache RocketMQ 4.9.8's broker configuration: every key of BrokerConfig,
NettyServerConfig, NettyClientConfig and MessageStoreConfig that none of rocketq's own config
classes has, with Java's default.

Why a class of keys rocketq does not act on: a broker.conf written for a Java broker loads unchanged
(RocketMQ's loader accepts every one of these), ``rocketq up -p`` says which ones do nothing, and
GET_BROKER_CONFIG answers the same key set as Java's ``Configuration.getAllConfigsFormatString()``,
which ``mqadmin getBrokerConfig`` / ``exportConfigs`` and rocketmq-dashboard read. Every field is
declared ``not_honoured``, so UPDATE_BROKER_CONFIG refuses each with a line that says so; a key
rocketq starts to honour moves to the config class of the layer that reads it.

Defaults are 4.9.8's on a machine with this one's processor count (several thread-pool sizes are
computed from it in Java); None is a key Java leaves unset, which GET_BROKER_CONFIG leaves out as
Java does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rocketq.config.fields import not_honoured

__all__ = ["JavaOnlyConfig"]

_CPUS = os.cpu_count() or 1
_SEND_THREADS = min(_CPUS, 4)

_THREADS = "rocketq serves every request on one event loop, not on thread pools"
_QUEUES = "rocketq has no thread-pool queues to bound"
_HA = "a rocketq slave never corrects a consumer's offset"
_DLEDGER = "rocketq has no DLedger commit log"
_CLIENT = "the broker's own connections use rocketq's fixed client settings"
_NETTY = "rocketq's transport is asyncio, not Netty"
_FAST_FAIL = "rocketq has no request queues to expire requests from"
_COMMERCIAL = "rocketq keeps no commercial statistics"
_BIT_MAP = "SQL92 filters are evaluated per message at pull time, without a consume-queue bit map"
_POOL = "rocketq writes through the mapped file, with no transient store pool"
_LMQ = "rocketq has no light message queues"
_FILES = "rocketq deletes expired files on its own fixed schedule"
_NO_PLUGIN = "rocketq has no pluggable message store"
_UNLOCKED = "appends run on the event loop, unlocked"
_WARM = "mapped files are not warmed"
_IN_PLACE = "delayed messages are delivered in order, in place"


@dataclass(frozen=True, slots=True)
class JavaOnlyConfig:
    """Apache RocketMQ 4.9.8 broker keys that rocketq accepts and reports but does not act on."""

    # -- BrokerConfig -------------------------------------------------------------------------------
    rocketmq_home: str = not_honoured("", why="rocketq needs no installation directory")
    broker_ip2: str = not_honoured("127.0.0.1", why=_HA)
    message_store_plug_in: str = not_honoured("", why=_NO_PLUGIN)
    send_message_thread_pool_nums: int = not_honoured(_SEND_THREADS, why=_THREADS)
    put_message_future_thread_pool_nums: int = not_honoured(_SEND_THREADS, why=_THREADS)
    pull_message_thread_pool_nums: int = not_honoured(16 + _CPUS * 2, why=_THREADS)
    process_reply_message_thread_pool_nums: int = not_honoured(16 + _CPUS * 2, why=_THREADS)
    query_message_thread_pool_nums: int = not_honoured(8 + _CPUS, why=_THREADS)
    admin_broker_thread_pool_nums: int = not_honoured(16, why=_THREADS)
    client_manage_thread_pool_nums: int = not_honoured(32, why=_THREADS)
    consumer_manage_thread_pool_nums: int = not_honoured(32, why=_THREADS)
    heartbeat_thread_pool_nums: int = not_honoured(min(32, _CPUS), why=_THREADS)
    end_transaction_thread_pool_nums: int = not_honoured(max(8 + _CPUS * 2, _SEND_THREADS * 4), why=_THREADS)
    flush_consumer_offset_history_interval: int = not_honoured(60_000, why="rocketq keeps no offset history")
    fetch_namesrv_addr_by_address_server: bool = not_honoured(
        False, why="the broker registers with the name servers of namesrvAddr")
    send_thread_pool_queue_capacity: int = not_honoured(10_000, why=_QUEUES)
    put_thread_pool_queue_capacity: int = not_honoured(10_000, why=_QUEUES)
    pull_thread_pool_queue_capacity: int = not_honoured(100_000, why=_QUEUES)
    reply_thread_pool_queue_capacity: int = not_honoured(10_000, why=_QUEUES)
    query_thread_pool_queue_capacity: int = not_honoured(20_000, why=_QUEUES)
    client_manager_thread_pool_queue_capacity: int = not_honoured(1_000_000, why=_QUEUES)
    consumer_manager_thread_pool_queue_capacity: int = not_honoured(1_000_000, why=_QUEUES)
    heartbeat_thread_pool_queue_capacity: int = not_honoured(50_000, why=_QUEUES)
    end_transaction_pool_queue_capacity: int = not_honoured(100_000, why=_QUEUES)
    filter_server_nums: int = not_honoured(0, why="rocketq starts no filter servers")
    high_speed_mode: bool = not_honoured(False, why="Java does not read it either")
    commercial_enable: bool = not_honoured(True, why=_COMMERCIAL)
    commercial_timer_count: int = not_honoured(1, why=_COMMERCIAL)
    commercial_trans_count: int = not_honoured(1, why=_COMMERCIAL)
    commercial_big_count: int = not_honoured(1, why=_COMMERCIAL)
    commercial_base_count: int = not_honoured(1, why=_COMMERCIAL)
    transfer_msg_by_heap: bool = not_honoured(True, why="pull answers are always copied from the mapped file")
    max_delay_time: int = not_honoured(40, why="Java does not read it either")
    disable_consume_if_consumer_read_slowly: bool = not_honoured(False, why="rocketq never disables a group")
    consumer_fallbehind_threshold: int = not_honoured(16 * 1024**3, why="rocketq never disables a group")
    broker_fast_failure_enable: bool = not_honoured(True, why=_FAST_FAIL)
    wait_time_mills_in_send_queue: int = not_honoured(200, why=_FAST_FAIL)
    wait_time_mills_in_pull_queue: int = not_honoured(5_000, why=_FAST_FAIL)
    wait_time_mills_in_heartbeat_queue: int = not_honoured(31_000, why=_FAST_FAIL)
    wait_time_mills_in_transaction_queue: int = not_honoured(3_000, why=_FAST_FAIL)
    start_accept_send_request_time_stamp: int = not_honoured(0, why="sends are accepted as soon as READY")
    enable_calc_filter_bit_map: bool = not_honoured(False, why=_BIT_MAP)
    expect_consumer_num_use_filter: int = not_honoured(32, why=_BIT_MAP)
    max_error_rate_of_bloom_filter: int = not_honoured(20, why=_BIT_MAP)
    filter_data_clean_time_span: int = not_honoured(
        24 * 3600 * 1000, why="filters live with their subscription")
    enable_detail_stat: bool = not_honoured(True, why="rocketq always keeps its statistics")
    auto_delete_unused_stats: bool = not_honoured(False, why="rocketq always keeps its statistics")
    isolate_log_enable: bool = not_honoured(False, why="rocketq logs through Python's logging")
    config_black_list: str = not_honoured(
        "configBlackList;brokerConfigPath", why="rocketq refuses every key that is not runtime-updatable")

    # -- NettyServerConfig (the keys RemotingServerConfig lacks) --------------------------------
    server_worker_threads: int = not_honoured(8, why=_NETTY)
    server_callback_executor_threads: int = not_honoured(0, why=_NETTY)
    server_selector_threads: int = not_honoured(3, why=_NETTY)
    server_oneway_semaphore_value: int = not_honoured(256, why=_NETTY)
    server_async_semaphore_value: int = not_honoured(64, why=_NETTY)
    server_pooled_byte_buf_allocator_enable: bool = not_honoured(True, why=_NETTY)
    use_epoll_native_selector: bool = not_honoured(False, why=_NETTY)

    # -- NettyClientConfig (writeBufferHigh/LowWaterMark are shared with the server's) ------------
    client_worker_threads: int = not_honoured(4, why=_CLIENT)
    client_callback_executor_threads: int = not_honoured(_CPUS, why=_CLIENT)
    client_oneway_semaphore_value: int = not_honoured(65535, why=_CLIENT)
    client_async_semaphore_value: int = not_honoured(65535, why=_CLIENT)
    connect_timeout_millis: int = not_honoured(3000, why=_CLIENT)
    channel_not_active_interval: int = not_honoured(60_000, why=_CLIENT)
    client_channel_max_idle_time_seconds: int = not_honoured(120, why=_CLIENT)
    client_socket_snd_buf_size: int = not_honoured(0, why=_CLIENT)
    client_socket_rcv_buf_size: int = not_honoured(0, why=_CLIENT)
    client_pooled_byte_buf_allocator_enable: bool = not_honoured(False, why=_CLIENT)
    client_close_socket_if_timeout: bool = not_honoured(True, why=_CLIENT)
    use_tls: bool = not_honoured(False, why="the broker's own connections use TLS by tls.enable")

    # -- MessageStoreConfig (the keys rocketq's MessageStoreConfig lacks) ------------------------
    store_path_d_ledger_commit_log: str | None = not_honoured(
        None, key="storePathDLedgerCommitLog", why=_DLEDGER)
    read_only_commit_log_store_paths: str | None = not_honoured(None, why="the commit log has one directory")
    enable_consume_queue_ext: bool = not_honoured(False, why=_BIT_MAP)
    mapped_file_size_consume_queue_ext: int = not_honoured(48 * 1024 * 1024, why=_BIT_MAP)
    bit_map_length_consume_queue_ext: int = not_honoured(64, why=_BIT_MAP)
    commit_interval_commit_log: int = not_honoured(200, why=_POOL)
    use_reentrant_lock_when_put_message: bool = not_honoured(True, why=_UNLOCKED)
    flush_commit_log_timed: bool = not_honoured(True, why="the flush service sleeps on its interval")
    delete_commit_log_files_interval: int = not_honoured(100, why=_FILES)
    delete_consume_queue_files_interval: int = not_honoured(100, why=_FILES)
    destroy_maped_file_interval_forcibly: int = not_honoured(120_000, why=_FILES)
    redelete_hanged_file_interval: int = not_honoured(120_000, why=_FILES)
    put_msg_index_hight_water: int = not_honoured(600_000, why="the index is built as messages arrive")
    commit_commit_log_least_pages: int = not_honoured(4, why=_POOL)
    flush_least_pages_when_warm_maped_file: int = not_honoured(1024 // 4 * 16, why=_WARM)
    commit_commit_log_thorough_interval: int = not_honoured(200, why=_POOL)
    max_transfer_bytes_on_message_in_disk: int = not_honoured(
        64 * 1024, why="pulls are bounded by the in-memory limits wherever the data is")
    max_transfer_count_on_message_in_disk: int = not_honoured(
        8, why="pulls are bounded by the in-memory limits wherever the data is")
    message_index_safe: bool = not_honoured(False, why="the index is recovered from the commit log")
    flush_delay_offset_interval: int = not_honoured(
        10_000, why="delay offsets are written with each delivery")
    warm_maped_file_enable: bool = not_honoured(False, why=_WARM)
    offset_check_in_slave: bool = not_honoured(False, why=_HA)
    debug_lock_enable: bool = not_honoured(False, why=_UNLOCKED)
    duplication_enable: bool = not_honoured(False, why=_HA)
    disk_fall_recorded: bool = not_honoured(True, why=_COMMERCIAL)
    os_page_cache_busy_time_out_mills: int = not_honoured(1000, why="appends never wait on a lock")
    transient_store_pool_enable: bool = not_honoured(False, why=_POOL)
    transient_store_pool_size: int = not_honoured(5, why=_POOL)
    fast_fail_if_no_buffer_in_store_pool: bool = not_honoured(False, why=_POOL)
    enable_d_leger_commit_log: bool = not_honoured(False, key="enableDLegerCommitLog", why=_DLEDGER)
    d_leger_group: str | None = not_honoured(None, key="dLegerGroup", why=_DLEDGER)
    d_leger_peers: str | None = not_honoured(None, key="dLegerPeers", why=_DLEDGER)
    d_leger_self_id: str | None = not_honoured(None, key="dLegerSelfId", why=_DLEDGER)
    preferred_leader_id: str | None = not_honoured(None, why=_DLEDGER)
    is_enable_batch_push: bool = not_honoured(False, why=_DLEDGER)
    enable_schedule_message_stats: bool = not_honoured(True, why=_COMMERCIAL)
    enable_lmq: bool = not_honoured(False, why=_LMQ)
    enable_multi_dispatch: bool = not_honoured(False, why=_LMQ)
    max_lmq_consume_queue_num: int = not_honoured(20_000, why=_LMQ)
    enable_schedule_async_deliver: bool = not_honoured(False, why=_IN_PLACE)
    schedule_async_deliver_max_pending_limit: int = not_honoured(2000, why=_IN_PLACE)
    schedule_async_deliver_max_resend_num2_blocked: int = not_honoured(
        3, why=_IN_PLACE)
