"""Files and queues of a RocketMQ store: mmap readers and writers returning plain dataclasses.

- ``store``: ``Store``, a store directory opened read-only (its paths, parts and geometry).
- ``read``: record-by-record readers (CommitLog, consume queues, index files).
- ``write``: the writer a broker's store is (appends, dispatch, config files).
- ``scan``: bulk numpy scans of whole CommitLog files and the bulk dispatch built on them.
- ``mapped``: read-only mapped files and mapped-file queues; ``filetail``: what ends a file's data.
- ``naming``: file and directory names (offsets, index times, topic directories).
- ``settings``: ``MessageStoreConfig`` and broker.conf; ``checkpoint``: the checkpoint file.
- ``configfiles``: the broker's config/*.json, read as ``ConfigManager`` does.
- ``sparse``: comparing pre-allocated (sparse) files by their data ranges only.
"""

from rmqcli.store.store import Store

__all__ = ["Store"]
