"""The RocketMQ remoting protocol: frames, JSON and ROCKETMQ headers, codes, typed custom headers,
JSON bodies and an asyncio client (protocol.md A and B).

Nothing is imported here, so ``import rmqcli.remoting.x`` stays cheap; ``client`` imports asyncio
and the codec only when a connection is made.
"""
