"""The keys an rmq broker signs its own requests with: ``rmqBrokerAccessKey`` and
``rmqBrokerSecretKey``, rmq's own broker.conf keys (a RocketMQ broker ignores them).

Every request the broker sends is signed with them as a client's ``AclClientRPCHook`` signs:
REGISTER_BROKER, UNREGISTER_BROKER and BROKER_HEARTBEAT to the name servers, a slave's copies of
its master's tables (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin only), an acting slave's escaped messages. The account
must be an admin on the brokers and name servers that check it. Without the keys, a broker with
``aclEnable=true`` signs with a key made for its process (``process_credentials``), which only the
NameServer of the same ``rmq serve`` accepts.

4.9.8 and 5.1.1 brokers sign none of these (``BrokerOuterAPI`` is built without an RPC hook): a Java
broker's group passes an ACL by its address in ``globalWhiteRemoteAddresses``, as RocketMQ's ACL
guide says for a master's slaves.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqcli.conf.keys import setting
from rmqcli.conf.parse import BrokerConf
from rmqcli.errors import UsageError
from rmqcli.remoting.acl import Credentials

if TYPE_CHECKING:
    from rmqcli.broker.config import BrokerConfig

ACCESS_KEY = "rmqBrokerAccessKey"
SECRET_KEY = "rmqBrokerSecretKey"
PROPERTY_NAMES = (ACCESS_KEY, SECRET_KEY)
HIDDEN = "******"  # what GET_BROKER_CONFIG shows for the secret


@dataclass(frozen=True)
class SigningKeys:
    """The typed view of the two keys (rows of ``rmqcli.conf.keys``, owner ``acl``)."""

    access_key: str = setting(ACCESS_KEY)
    secret_key: str = setting(SECRET_KEY)


def configured_credentials(config: BrokerConfig) -> Credentials | None:
    """The two keys of broker.conf, None without them; one without the other is a usage error."""
    keys = BrokerConf(config.given).view(SigningKeys)  # broker.conf as read, through the table
    if bool(keys.access_key) != bool(keys.secret_key):
        raise UsageError(f"broker.conf: {ACCESS_KEY} and {SECRET_KEY} go together")
    return Credentials(keys.access_key, keys.secret_key) if keys.access_key else None


def process_credentials() -> Credentials:
    """A key for one process: its broker signs with it, its NameServer accepts it."""
    return Credentials(f"rmq-broker-{secrets.token_hex(8)}", secrets.token_urlsafe(32))
