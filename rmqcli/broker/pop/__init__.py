"""POP consumption in the broker, as RocketMQ 5.1.1 stores and answers it.

Design note.

What it is: POP_MESSAGE 200050, ACK_MESSAGE 200051, PEEK_MESSAGE 200052,
CHANGE_MESSAGE_INVISIBLETIME 200053, NOTIFICATION 200054, POLLING_INFO 200055 over remoting
(``handlers.HANDLERS``), checkpoints and acks in the revive topic ``rmq_sys_REVIVE_LOG_<cluster>``
(8 queues, perm 6, created at start), the revive service that puts un-acked messages into
``%RETRY%<group>_<topic>`` after their invisible time, and orderly POP (``consumerOrderInfo.json``).
Consumer offsets are the 4.x table: a group can move between PULL and POP.

Where the behaviour is specified: the research notes issue21 §2, §3, §2b, §7 (5.1.1's processors
and ``PopReviveService``, named in each module's docstring); tests/broker/test_pop_*.py check it in
this process, over remoting against ``rmq serve``, with the 5.1.1 Java push consumer and beside the
real 5.1.1 broker.

Modules: ``constants`` (names, extra info), ``config`` (broker.conf keys), ``checkpoint``
(ck / ack JSON), ``revivelog`` (the one put of ck and ack: where a timer slots in), ``read``
(queue reads with offsets), ``pop``, ``ack`` (ack and change invisible time), ``peek``,
``notify`` (notification, polling info), ``order`` (order info), ``polling`` (long polling),
``revive`` (revive service), ``service`` (the per-broker state), ``handlers`` (remoting),
``assignment`` (QUERY_ASSIGNMENT 400 / SET_MESSAGE_REQUEST_MODE 401: a 5.x push consumer with
``clientRebalance=false`` is told to POP).

In-process API (what the gRPC layer calls; ``ctl`` is the ``BrokerContext``, every call runs on
the broker's event loop; a refused request raises ``pop.PopError`` with ``code`` and ``remark``,
the remoting response code and remark 5.1.1 gives):

* ``await pop.pop_message(ctl, pop.PopRequest(group, topic, queue_id, max_msg_nums,
  invisible_time, poll_time=0, born_time=0, init_mode=0, exp_type=None, exp=None, order=False,
  attempt_id=None)) -> pop.PopResult``: ``code`` SUCCESS with ``records`` (stored records, bytes as
  PULL returns them; ``offsets`` = ``(retry, queue id, queue offset)`` of each) or
  POLLING_TIMEOUT / POLLING_FULL; ``pop_time``, ``invisible_time``, ``revive_qid``, ``rest_num``,
  ``start_offset_info``, ``msg_offset_info``, ``order_count_info``. ``PopResult.handle(i,
  brokerName)`` is the receipt handle of the i-th message (the 5.1 proxy's 9 fields; retried ones
  also carry the 8-field extra info as ``POP_CK``); ``constants.parse_extra_info`` reads one back
  and ``ExtraInfo.real_topic`` gives the topic to ack on. ``pop_once`` is the same without waiting.
* ``ack.ack_message(ctl, ack.AckRequest(group, topic, queue_id, extra_info, offset)) -> None``
  (``topic`` the real one: ``ExtraInfo.real_topic``).
* ``ack.change_invisible_time(ctl, ack.ChangeInvisibleRequest(group, topic, queue_id, extra_info,
  offset, invisible_time)) -> ack.ChangeInvisibleResult(pop_time, invisible_time, revive_qid)``:
  the new handle is the old one with these three fields.
* ``peek.peek_message(ctl, group, topic, queue_id, max_msg_nums) -> peek.PeekResult``;
  ``await notify.notification(ctl, group, topic, queue_id, poll_time, born_time) -> bool``;
  ``notify.polling_num(ctl, group, topic, queue_id) -> int``.
* ``service.pop_service(ctl)``: the state (``order``, ``polling``, ``revive``); ``service.run(ctl)``
  is the revive service's coroutine (the controller starts it with its other services) and
  ``handlers.HANDLERS`` the remoting table the controller registers.

This ``__init__`` imports nothing (no cycle, not even a type-only one, goes through the package):
``from rmqcli.broker.pop import constants`` (or ``config``) runs that module alone, never the
handlers or the services, and so never ``rmqcli.broker.context``. Inside the package the revive
service sees the POP state through ``revive.PopState``, so ``service`` imports ``revive`` and not
the other way round.
"""
