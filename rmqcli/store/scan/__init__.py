"""Bulk scans: whole CommitLog files checked and read at once (numpy), and dispatch of whole ranges.

- ``headerscan``: every record of a file checked and its header fields read into arrays.
- ``propscan``: chosen properties of many records (and their Java hashes) located at once.
- ``fastdispatch``: consume queues and index files for a whole scan, the same bytes as ``Dispatcher``.
"""
