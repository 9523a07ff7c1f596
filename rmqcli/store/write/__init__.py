"""The store writer: CommitLog appends, consume queues, index files and config, as 4.9.x writes them."""
