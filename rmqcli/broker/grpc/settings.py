"""Client settings: what each client said in its Telemetry ``settings`` and what the server answers
(the 5.1 proxy's ``GrpcClientSettingsManager``).

A producer's answer adds the backoff policy (3 attempts, exponential from 10 ms to 1 s, x2) and to
``publishing`` ``validate_message_type`` (``enableTopicMessageTypeCheck``, true) and
``max_body_size`` (``maxMessageSize``, 4 MiB: a 5.x producer refuses bodies over it, so it is never
0). A consumer's takes ``receive_batch_size`` 32, ``long_polling_timeout`` 20 s and ``fifo`` from
the group's ``consumeMessageOrderly``, and ``max_attempts`` = ``retryMaxTimes`` + 1 with the
group's retry policy (``groupRetryPolicy``: EXPONENTIAL, else CUSTOMIZED with the 5.x default
steps). Every answer carries ``metric {on: false}``.

Settings are kept per client id until NotifyClientTermination; at most ``MAX_CLIENTS`` and
``MAX_TOTAL_BYTES`` of them (the oldest is forgotten first), so a flood of client ids or of large
settings cannot grow the table without bound. One client's settings may be at most
``MAX_SETTINGS_BYTES`` and name at most ``MAX_TOPICS`` topics or subscriptions (``check_size``:
BAD_REQUEST, rmq's own bounds; the proxy has none but the message size).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_CLIENTS = 10_000
MAX_SETTINGS_BYTES = 256 * 1024  # 1,024 topics of 127 characters fit
MAX_TOPICS = 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
PRODUCER_MAX_ATTEMPTS = 3  # grpcClientProducerMaxAttempts
PRODUCER_BACKOFF_MS = (10, 1000, 2.0)  # initial, max, multiplier
MAX_BODY_SIZE = 4 * 1024 * 1024  # ProxyConfig.maxMessageSize
RECEIVE_BATCH_SIZE = 32  # grpcClientConsumerLongPollingBatchSize
LONG_POLLING_TIMEOUT_MS = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
DEFAULT_RETRY_MAX_TIMES = 16
# CustomizedRetryPolicy's default next: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DEFAULT_NEXT_MS = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)
EXPONENTIAL_DEFAULT = (5000, 7_200_000, 2)  # ExponentialRetryPolicy: initial, max, multiplier

GroupLookup = Callable[[str], "dict | None"]


class SettingsTooLarge(ValueError):
    """Settings over ``MAX_SETTINGS_BYTES`` or ``MAX_TOPICS``."""


def check_size(settings: Any) -> None:
    """Raise ``SettingsTooLarge`` for settings over rmq's bounds."""
    size = settings.ByteSize()
    if size > MAX_SETTINGS_BYTES:
        raise SettingsTooLarge(f"settings of {size} bytes, more than {MAX_SETTINGS_BYTES}")
    count = max(len(settings.publishing.topics), len(settings.subscription.subscriptions))
    if count > MAX_TOPICS:
        raise SettingsTooLarge(f"settings naming {count} topics, more than {MAX_TOPICS}")


class SettingsStore:
    """The settings of the connected clients, by client id."""

    def __init__(self, definition: Any, group_config: GroupLookup):
        self.d = definition
        self.group_config = group_config
        self._raw: OrderedDict[str, Any] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self.total_bytes = 0

    def __len__(self) -> int:
        return len(self._raw)

    def update(self, client_id: str, settings: Any) -> None:
        """``updateClientSettings``: a consumer's settings start from the defaults."""
        if settings.HasField("subscription"):
            base = self.d.Settings()
            self._merge_subscription(base, None)
            base.MergeFrom(settings)
            settings = base
        self._forget(client_id)
        self._raw[client_id] = settings
        self._sizes[client_id] = size = settings.ByteSize()
        self.total_bytes += size
        while len(self._raw) > MAX_CLIENTS or self.total_bytes > MAX_TOTAL_BYTES:
            self._forget(next(iter(self._raw)))

    def _forget(self, client_id: str) -> Any | None:
        self.total_bytes -= self._sizes.pop(client_id, 0)
        return self._raw.pop(client_id, None)

    def raw(self, client_id: str) -> Any | None:
        return self._raw.get(client_id)

    def get(self, client_id: str) -> Any | None:
        """``getClientSettings``: the stored settings merged with the server's, or None."""
        settings = self._raw.get(client_id)
        return None if settings is None else self.merged(settings)

    def remove(self, client_id: str) -> Any | None:
        settings = self._forget(client_id)
        return None if settings is None else self.merged(settings)

    def merged(self, settings: Any) -> Any:
        out = self.d.Settings()
        out.CopyFrom(settings)
        if out.HasField("publishing"):
            backoff = out.backoff_policy
            backoff.max_attempts = PRODUCER_MAX_ATTEMPTS
            initial, maximum, multiplier = PRODUCER_BACKOFF_MS
            backoff.exponential_backoff.initial.FromMilliseconds(initial)
            backoff.exponential_backoff.max.FromMilliseconds(maximum)
            backoff.exponential_backoff.multiplier = multiplier
            out.publishing.validate_message_type = True
            out.publishing.max_body_size = MAX_BODY_SIZE
        elif out.HasField("subscription"):
            config = self.group_config(out.subscription.group.name)
            if config is not None:
                self._merge_subscription(out, config)
        out.metric.on = False
        return out

    def _merge_subscription(self, out: Any, config: dict | None) -> None:
        """``mergeSubscriptionData`` with the group's config (None: a default group)."""
        config = config or {}
        sub = out.subscription
        sub.receive_batch_size = RECEIVE_BATCH_SIZE
        sub.long_polling_timeout.FromMilliseconds(LONG_POLLING_TIMEOUT_MS)
        sub.fifo = bool(config.get("consumeMessageOrderly", False))
        backoff = out.backoff_policy
        backoff.max_attempts = _int(config.get("retryMaxTimes"), DEFAULT_RETRY_MAX_TIMES) + 1
        policy = config.get("groupRetryPolicy")
        policy = policy if isinstance(policy, dict) else {}
        if str(policy.get("type", "")).upper() == "EXPONENTIAL":
            exp = policy.get("exponentialRetryPolicy")
            exp = exp if isinstance(exp, dict) else {}
            initial, maximum, multiplier = EXPONENTIAL_DEFAULT
            backoff.exponential_backoff.initial.FromMilliseconds(_int(exp.get("initial"), initial))
            backoff.exponential_backoff.max.FromMilliseconds(_int(exp.get("max"), maximum))
            backoff.exponential_backoff.multiplier = float(_int(exp.get("multiplier"), multiplier))
        else:
            custom = policy.get("customizedRetryPolicy")
            custom = custom if isinstance(custom, dict) else {}
            steps = custom.get("next")
            if not isinstance(steps, list) or not all(isinstance(s, int) for s in steps):
                steps = list(DEFAULT_NEXT_MS)
            backoff.customized_backoff.Clear()
            for step in steps[:64]:
                backoff.customized_backoff.next.add().FromMilliseconds(max(0, step))


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
