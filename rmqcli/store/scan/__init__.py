"""Bulk scans: whole CommitLog files checked and read at once (numpy), and dispatch of whole ranges."""
