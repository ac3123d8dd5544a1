"""RocketMQ ACL 1.0 (plain_acl.yml, signed requests), sans-I/O but for the one file it reads.

``signature``: the signed content and HmacSHA1 signature, and the client's ``RequestSigner``;
``model``: permissions and the account/white-list rules; ``resource``: which resources a request
needs (PlainAccessValidator.parse); ``address``: white-list patterns; ``manager``: the file.
"""

from rocketq.acl.errors import AclError
from rocketq.acl.manager import PlainPermissionManager
from rocketq.acl.model import ADMIN_CODES, DENY, PUB, SUB, AccessRequest, AclRules, PlainAccount
from rocketq.acl.resource import parse_request
from rocketq.acl.signature import RequestSigner, SessionCredentials, cal_signature, request_content

__all__ = [
    "ADMIN_CODES",
    "DENY",
    "PUB",
    "SUB",
    "AccessRequest",
    "AclError",
    "AclRules",
    "PlainAccount",
    "PlainPermissionManager",
    "RequestSigner",
    "SessionCredentials",
    "cal_signature",
    "parse_request",
    "request_content",
]
