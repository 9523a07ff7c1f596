"""The store writer: CommitLog appends, consume queues, index files and config, as 4.9.x writes them.

- ``writer``: ``StoreWriter``, the CommitLog append path (messages, batches, delays) and its flushes.
- ``messages``: what the writer is given (``Message``, ``InnerMessage``, batches) and returns.
- ``records``: CommitLog record bytes from the compiled forms of ``formats.commitlog``.
- ``dispatch``: ``Dispatcher``, a broker's reput: records to consume queues and index files.
- ``cq``: consume-queue files, unit by unit; ``index``: index files, key by key.
- ``files``: writable pre-allocated mapped files and queues of them.
- ``config``: the broker's config/*.json in the 4.9.x shapes.
"""
