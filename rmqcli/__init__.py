"""rmq: a command-line toolkit for Apache RocketMQ operators."""

__version__ = "0.1.0"
