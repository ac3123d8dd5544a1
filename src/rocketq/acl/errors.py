"""AclException: a refused request (NO_PERMISSION on the wire) or a bad ACL configuration."""

from __future__ import annotations

from rocketq.errors import NoPermission

__all__ = ["AclError"]


class AclError(NoPermission):
    """RocketMQ's AclException. The message is Java's remark text and never holds a secret.

    Not retriable: unlike a broker whose write permission was wiped, every broker of a cluster
    that shares the ACL file refuses the same request.
    """

    retriable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
