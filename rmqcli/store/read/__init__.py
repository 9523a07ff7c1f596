"""Readers of the store's files: CommitLog records, consume-queue units, index look-ups.

- ``commitlog``: records at any physical offset, across files, validated as a broker checks them.
- ``consumequeue``: 20-byte units of a queue's files and their valid region.
- ``index``: index files and ``IndexService.queryOffset``'s key look-up over them.
"""
