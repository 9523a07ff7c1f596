"""Byte layouts of Apache RocketMQ's store files and wire frames, declared once with Construct.

Nothing here touches files or sockets. Specification: ``formats.md`` (store) and the
Apache RocketMQ sources named in each module's docstring.
"""
