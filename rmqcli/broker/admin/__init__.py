"""Admin requests of the Broker: ``AdminBrokerProcessor`` (protocol.md B.4), the broker's default
processor, one module a family: topics (``topics``), the runtime table (``runtime``), configuration
(``config``), subscription groups and offsets (``groups``), online clients (``clients``), queues and
clean-ups (``store``), statistics (``stats``). ``HANDLERS`` merges them; any other code answers
REQUEST_CODE_NOT_SUPPORTED, as the 4.9.x broker's default processor does.
"""

from rmqcli.broker.admin import clients, config, groups, runtime, stats, store, timer, topics

HANDLERS = {}
for _family in (topics, runtime, config, groups, clients, store, stats, timer):
    HANDLERS.update(_family.HANDLERS)
