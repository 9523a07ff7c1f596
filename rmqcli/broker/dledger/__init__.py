"""A broker in a DLedger group (4.9.8's ``DLedgerCommitLog`` and ``DLedgerRoleChangeHandler``)."""
