"""The ACL account a command acts as: ``--access-key``/``--secret-key``, else the environment's
``ROCKETQ_ACCESS_KEY``/``ROCKETQ_SECRET_KEY`` (better than a command line others can read)."""

from __future__ import annotations

import os

from rocketq.acl.signature import SessionCredentials
from rocketq.cli.errors import UsageError

__all__ = ["session_credentials"]


def session_credentials(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """None when neither is given anywhere; a usage error when only one is."""
    ak = access_key or os.environ.get("ROCKETQ_ACCESS_KEY")
    sk = secret_key or os.environ.get("ROCKETQ_SECRET_KEY")
    if not ak and not sk:
        return None
    if not ak or not sk:
        raise UsageError("an access key needs its secret key, and the other way round "
                         "(--access-key/--secret-key or ROCKETQ_ACCESS_KEY/ROCKETQ_SECRET_KEY)")
    return SessionCredentials(ak, sk)
