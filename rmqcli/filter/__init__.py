"""Message filters a consumer subscribes with: RocketMQ's SQL92 selectors (``sql92``)."""
