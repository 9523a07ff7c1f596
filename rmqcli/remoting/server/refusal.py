"""A request a processor refuses: its response code and remark (protocol.md B.3, B.7).

The checks of a processor's ``parse`` step raise a ``Refusal`` (``send.SendError``,
``pull.PullError``); the handler answers it with ``answer``, so every check states its code and
remark where it is made. ``FAQ`` is the suffix 4.9.x's ``FAQUrl.suggestTodo`` adds to some remarks,
``FAQ5`` the one 5.1.1's adds (its URLs all name one page): the remarks of RocketMQ 5's own requests
(POP, ACK, PEEK) carry that one.
"""

from __future__ import annotations

from rmqcli.remoting.codec import RemotingCommand

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
FAQ5 = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def no_property_filter(expression_type: str | None) -> str:
    """The remark of a SQL92 subscription to a broker without ``enablePropertyFilter``."""
    return f"The broker does not support consumer to filter message by {expression_type}"


class Refusal(Exception):
    """A request the broker refuses: the response code and remark."""

    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code
        self.remark = remark

    def answer(self, req: RemotingCommand) -> RemotingCommand:
        """The response that refuses ``req``."""
        return req.response(self.code, self.remark)
