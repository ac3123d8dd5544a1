"""The RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService) of the broker process."""

from rocketq.broker.grpc.server import GrpcServer

__all__ = ["GrpcServer"]
