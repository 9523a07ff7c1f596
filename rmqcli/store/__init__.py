"""Files and queues of a RocketMQ store: mmap readers and writers returning plain dataclasses."""

from rmqcli.store.store import Store

__all__ = ["Store"]
