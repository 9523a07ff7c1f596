"""Bulk jobs over many stores on Apache Spark (``rmq pipeline ...``): export, stats, search, rebuild.

A Spark task is one CommitLog file (records never span files, formats.md §1.10); tasks decode
with the ``rmqcli.store`` readers. PySpark is optional (``pip install 'rmqcli[spark]'``) and is
imported only inside these modules' functions, never by ``rmq --help``.
"""
