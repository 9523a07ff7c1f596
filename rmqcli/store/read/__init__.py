"""Readers of the store's files: CommitLog records, consume-queue units, index look-ups."""
