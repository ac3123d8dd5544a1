"""Facts about Apache RocketMQ 4.9.8 that tests compare rocketq with, read from its Java source."""

from __future__ import annotations

# The non-static fields of those four classes at tag rocketmq-all-4.9.8, in declaration order
# (BrokerConfig, NettyClientConfig, NettyServerConfig, MessageStoreConfig): 185 distinct keys, as
# writeBufferHighWaterMark and writeBufferLowWaterMark are in both Netty classes.
JAVA_4_9_8_KEYS = [
    "rocketmqHome", "namesrvAddr", "brokerIP1", "brokerIP2", "brokerName", "brokerClusterName",
    "brokerId", "brokerPermission", "defaultTopicQueueNums", "autoCreateTopicEnable",
    "clusterTopicEnable", "brokerTopicEnable", "autoCreateSubscriptionGroup", "messageStorePlugIn",
    "msgTraceTopicName", "traceTopicEnable", "sendMessageThreadPoolNums",
    "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums", "processReplyMessageThreadPoolNums",
    "queryMessageThreadPoolNums", "adminBrokerThreadPoolNums", "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums", "heartbeatThreadPoolNums", "endTransactionThreadPoolNums",
    "flushConsumerOffsetInterval", "flushConsumerOffsetHistoryInterval", "rejectTransactionMessage",
    "fetchNamesrvAddrByAddressServer", "sendThreadPoolQueueCapacity", "putThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity", "replyThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity",
    "clientManagerThreadPoolQueueCapacity", "consumerManagerThreadPoolQueueCapacity",
    "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity", "filterServerNums",
    "longPollingEnable", "shortPollingTimeMills", "notifyConsumerIdsChangedEnable", "highSpeedMode",
    "commercialEnable", "commercialTimerCount", "commercialTransCount", "commercialBigCount",
    "commercialBaseCount", "transferMsgByHeap", "maxDelayTime", "regionId", "registerBrokerTimeoutMills",
    "slaveReadEnable", "disableConsumeIfConsumerReadSlowly", "consumerFallbehindThreshold",
    "brokerFastFailureEnable", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
    "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue", "startAcceptSendRequestTimeStamp",
    "traceOn", "enableCalcFilterBitMap", "expectConsumerNumUseFilter", "maxErrorRateOfBloomFilter",
    "filterDataCleanTimeSpan", "filterSupportRetry", "enablePropertyFilter", "compressedRegister",
    "forceRegister", "registerNameServerPeriod", "transactionTimeOut", "transactionCheckMax",
    "transactionCheckInterval", "aclEnable", "storeReplyMessageEnable", "enableDetailStat",
    "autoDeleteUnusedStats", "isolateLogEnable", "configBlackList", "clientWorkerThreads",
    "clientCallbackExecutorThreads", "clientOnewaySemaphoreValue", "clientAsyncSemaphoreValue",
    "connectTimeoutMillis", "channelNotActiveInterval", "clientChannelMaxIdleTimeSeconds",
    "clientSocketSndBufSize", "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable",
    "clientCloseSocketIfTimeout", "useTLS", "writeBufferHighWaterMark", "writeBufferLowWaterMark",
    "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
    "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize", "serverSocketRcvBufSize", "serverSocketBacklog",
    "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector", "storePathRootDir",
    "storePathCommitLog", "storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "enableConsumeQueueExt",
    "mappedFileSizeConsumeQueueExt", "bitMapLengthConsumeQueueExt", "flushIntervalCommitLog",
    "commitIntervalCommitLog", "useReentrantLockWhenPutMessage", "flushCommitLogTimed",
    "flushIntervalConsumeQueue", "cleanResourceInterval", "deleteCommitLogFilesInterval",
    "deleteConsumeQueueFilesInterval", "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval",
    "deleteWhen", "diskMaxUsedSpaceRatio", "fileReservedTime", "putMsgIndexHightWater", "maxMessageSize",
    "checkCRCOnRecover", "flushCommitLogLeastPages", "commitCommitLogLeastPages",
    "flushLeastPagesWhenWarmMapedFile", "flushConsumeQueueLeastPages", "flushCommitLogThoroughInterval",
    "commitCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk", "accessMessageInMemoryMaxRatio",
    "messageIndexEnable", "maxHashSlotNum", "maxIndexNum", "maxMsgsNumBatch", "messageIndexSafe",
    "haListenPort", "haSendHeartbeatInterval", "haHousekeepingInterval", "haTransferBatchSize",
    "haMasterAddress", "haSlaveFallbehindMax", "brokerRole", "flushDiskType", "syncFlushTimeout",
    "slaveTimeout", "messageDelayLevel", "flushDelayOffsetInterval", "cleanFileForciblyEnable",
    "warmMapedFileEnable", "offsetCheckInSlave", "debugLockEnable", "duplicationEnable",
    "diskFallRecorded", "osPageCacheBusyTimeOutMills", "defaultQueryMaxNum", "transientStorePoolEnable",
    "transientStorePoolSize", "fastFailIfNoBufferInStorePool", "enableDLegerCommitLog", "dLegerGroup",
    "dLegerPeers", "dLegerSelfId", "preferredLeaderId", "isEnableBatchPush", "enableScheduleMessageStats",
    "enableLmq", "enableMultiDispatch", "maxLmqConsumeQueueNum", "enableScheduleAsyncDeliver",
    "scheduleAsyncDeliverMaxPendingLimit", "scheduleAsyncDeliverMaxResendNum2Blocked",
]
# Fields Java leaves null by default; object2Properties skips a null field, so does rocketq.
JAVA_NULL_BY_DEFAULT = {
    "namesrvAddr", "storePathCommitLog", "storePathDLedgerCommitLog", "readOnlyCommitLogStorePaths",
    "haMasterAddress", "dLegerGroup", "dLegerPeers", "dLegerSelfId", "preferredLeaderId",
}
# rocketq's own keys, reported beside Java's (Java, too, reports any extra key its config file set).
ROCKETQ_ONLY = {
    "bindAddress", "channelExpiredTimeout", "compatibilityMode", "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio", "enableShutdownGracefully", "metricsPort", "reviveQueueNum",
    "shutdownWaitTimeSeconds",
    # RocketMQ 5's pop keys (docs/pop.md)
    "reviveInterval", "popPollingSize", "maxPopPollingSize", "popFromRetryProbability", "enableRetryTopicV2",
    "defaultMessageRequestMode",
    # ACL and TLS (docs/security.md)
    "plainAclFile", "innerAccessKey", "tls.server.mode", "tls.server.certPath", "tls.server.keyPath",
    "tls.server.need.client.auth", "tls.server.trustCertPath", "tls.enable", "tls.client.authServer",
    "tls.client.trustCertPath",
    # ACL 2.0's switches (5.3's AuthConfig; initAuthenticationUser is never reported)
    "authenticationEnabled", "authorizationEnabled",
    # timer messages: RocketMQ 5's keys (MessageStoreConfig 5.3.1, BrokerConfig 5.3.2), docs/timer.md
    "timerWheelEnable", "timerPrecisionMs", "timerMaxDelaySec", "timerRollWindowSlot",
    "mappedFileSizeTimerLog", "timerFlushIntervalMs", "recallMessageEnable",
    "allowRecallWhenBrokerNotWriteable",
    # the RocketMQ 5 gRPC endpoint, which Apache serves from its proxy (docs/grpc.md)
    "grpcPort",
    # RocketMQ 5's controller mode (docs/ha.md): 5.x keys a 4.9.8 broker does not have
    "brokerHeartbeatInterval", "controllerHeartBeatTimeoutMills", "enableControllerMode",
}
