"""RocketMQ 5.1.1's consumer-group retry policy (``SubscriptionGroupConfig.groupRetryPolicy``) and
the other 5.x keys of a group's config.

``GroupRetryPolicy`` is a fastjson bean: ``type`` (EXPONENTIAL / CUSTOMIZED, default CUSTOMIZED;
an unknown name reads as null), ``exponentialRetryPolicy`` (``initial`` 5000, ``max`` 7200000,
``multiplier`` 2) and ``customizedRetryPolicy`` (``next``: the 18 delays of ``messageDelayLevel``
from 1 s, in ms); null members are not written. ``policy_value`` gives the JSON value fastjson
writes for what a request or ``-p`` holds, as 5.1.1 reads it into the bean and writes it back.
"""

from __future__ import annotations

import json
from typing import Any

TYPES = ("EXPONENTIAL", "CUSTOMIZED")  # GroupRetryPolicyType, in ordinal order
EXPONENTIAL_DEFAULTS = {"initial": 5000, "max": 7_200_000, "multiplier": 2}
CUSTOMIZED_NEXT = [
    1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000,
    540000, 600000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
]  # fmt: skip
MAX_NEXT = 1024  # bound on a customized policy's delays (what a request may make the broker keep)

GROUP_5X_DEFAULTS: dict[str, Any] = {
    "consumeMessageOrderly": False,
    "consumeTimeoutMinute": 15,
    "groupRetryPolicy": {"type": "CUSTOMIZED"},
    "groupSysFlag": 0,
}
"""The keys 5.1.1's ``SubscriptionGroupConfig`` adds to 4.9.x's nine, with its defaults
(``subscriptionDataSet``, null by default, is not written)."""


class PolicyError(ValueError):
    """A retry policy that does not read as 5.1.1's ``GroupRetryPolicy``."""


def _long(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PolicyError(f"{what} is not a number: {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise PolicyError(f"{what} is not a number: {value!r}") from None
    if not -(1 << 63) <= number < 1 << 63:
        raise PolicyError(f"{what} is out of the range of a long: {value!r}")
    return number


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyError(f"{what} is not a JSON object: {value!r}")
    return value


def policy_value(value: Any) -> dict[str, Any] | None:
    """The ``groupRetryPolicy`` fastjson writes for ``value`` (a decoded JSON value); None for
    null. Keys in fastjson's order (sorted)."""
    if value is None:
        return None
    value = _object(value, "groupRetryPolicy")
    out: dict[str, Any] = {}
    custom = value.get("customizedRetryPolicy")
    if custom is not None:
        steps = _object(custom, "customizedRetryPolicy").get("next", CUSTOMIZED_NEXT)
        if steps is None:
            out["customizedRetryPolicy"] = {}
        else:
            if not isinstance(steps, list) or len(steps) > MAX_NEXT:
                raise PolicyError(f"customizedRetryPolicy.next is not a list of at most {MAX_NEXT} numbers")
            out["customizedRetryPolicy"] = {"next": [_long(s, "customizedRetryPolicy.next") for s in steps]}
    exp = value.get("exponentialRetryPolicy")
    if exp is not None:
        exp = _object(exp, "exponentialRetryPolicy")
        out["exponentialRetryPolicy"] = {
            k: _long(exp.get(k, d), f"exponentialRetryPolicy.{k}") for k, d in EXPONENTIAL_DEFAULTS.items()
        }
    kind = value.get("type", "CUSTOMIZED")
    if isinstance(kind, int) and not isinstance(kind, bool) and 0 <= kind < len(TYPES):
        kind = TYPES[kind]  # fastjson reads an enum from its ordinal too
    if kind in TYPES:
        out["type"] = kind
    elif kind is not None and not isinstance(kind, str):
        raise PolicyError(f"groupRetryPolicy.type is not a name: {kind!r}")
    return out


def parse_policy(text: str) -> dict[str, Any]:
    """``-p``'s JSON (``JSON.parseObject(text, GroupRetryPolicy.class)``) as fastjson writes it."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise PolicyError(f"not JSON: {exc}") from None
    policy = policy_value(value)
    if policy is None:
        raise PolicyError("null is not a retry policy")
    return policy


def policy_string(policy: dict[str, Any] | None) -> str:
    """``GroupRetryPolicy.toString()`` (guava's ``toStringHelper``); a customized policy's delays
    as a list (Java shows the array's identity)."""
    if policy is None:
        return "null"
    exp = policy.get("exponentialRetryPolicy")
    custom = policy.get("customizedRetryPolicy")
    exp_text = "null"
    if exp is not None:
        exp_text = (
            f"ExponentialRetryPolicy{{initial={exp['initial']}, max={exp['max']}, "
            f"multiplier={exp['multiplier']}}}"
        )
    custom_text = "null" if custom is None else f"CustomizedRetryPolicy{{next={custom.get('next')}}}"
    return (
        f"GroupRetryPolicy{{type={policy.get('type', 'null')}, exponentialRetryPolicy={exp_text}, "
        f"customizedRetryPolicy={custom_text}}}"
    )
