"""RocketMQ 5.x timer messages in the broker.

Design note.

What it is: a message with ``TIMER_DELIVER_MS`` (absolute ms), ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS``
(relative) is delivered to its topic and queue at that time, as 5.1.1's ``TimerMessageStore``:

* Put path (``put``, ``message.timed``; 5.1.1 ``HookUtils.handleScheduleMessage``): only
  non-transactional or commit messages, not those already transformed (``TIMER_OUT_MS`` set); a 4.x
  ``DELAY`` level wins (the timer properties are dropped); precedence DELAY_SEC, DELAY_MS,
  DELIVER_MS. A time not after now is stored as sent (``TIMER_DEL_UNIQKEY`` then: refused). A delay
  beyond ``timerMaxDelaySec`` (or a value ``Long.parseLong`` refuses; a relative one is added
  without Java's wrap-around) is MESSAGE_ILLEGAL (13) "timer message illegal, ...";
  ``timerWheelEnable=false`` is SYSTEM_ERROR. Otherwise ``TIMER_OUT_MS`` (rounded down to
  ``timerPrecisionMs``, one unit earlier on a multiple), ``REAL_TOPIC``, ``REAL_QID`` are added and
  the message is stored in ``rmq_sys_wheel_timer`` queue 0 (no topic config, as 5.1.1); a send is
  answered SEND_OK with the timer queue's offset.
* Delivery (``service``): at ``TIMER_OUT_MS`` + one precision unit (when 5.1.1 reads the slot), a
  copy goes to ``REAL_TOPIC``/``REAL_QID`` with ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS`` added;
  its stored properties keep ``REAL_TOPIC``/``REAL_QID`` (as 5.1.1's do).

Progress: the timer files of 5.1.1 (``files``): ``timerwheel``, ``timerlog/``, ``config/timercheck``,
``config/timermetrics``, written as 5.1.1 writes them (``rmqcli.store.timer_write``) and read at
start as 5.1.1 reads them (``rmqcli.store.timer``), so a 5.1.1 broker started on an rmq store
delivers rmq's pending timers and rmq started on a 5.1.1 store delivers that broker's (none twice
that was delivered before the last flush). A store without them (rmq's before, 4.x) is read from the
offset of group ``CID_RMQ_SYS_TIMER_GROUP`` on the timer topic (still kept in consumerOffset.json)
and gets them. Delivery itself is rmq's: a heap of the timers held in memory, not 5.1.1's slot by
slot reading; after a SIGKILL a timer is delivered late or twice, never lost. Where rmq differs from
5.1.1: no flow control (``timerCongestNumEachSlot``); a timer due when read also gets a unit, in its
past slot (``files``). At most ``timerMaxPending`` (rmq's own broker.conf key, default 100000) timers
are held in memory, the rest wait on disk (see ``service``, ``horizon``). Batches are not timed
(5.1.1's hook sees only single messages); a committed transaction's timer is the transaction
module's to route through ``put.put_inner``.

Where the behaviour is specified: the research notes issue21 §4, §7 (5.1.1's
``TimerMessageStore`` and ``HookUtils``, followed as above), issue 41 for what is held in memory
(``horizon``); tests/broker/test_timer_*.py check it in this process, in ``rmq serve`` and against
the real 5.1.1 broker and 4.x/5.x clients.

Modules: ``config`` (broker.conf keys), ``message`` (the timer properties, the put hook's checks,
``TimerRefusal``, the delivered copy), ``put`` (the put hook over the store), ``service`` (the
delivery service: heap, progress, one per broker), ``horizon`` (which timers are held in memory),
``files`` (the timer files), ``api`` (what the rest of the broker calls).

In-process API, in ``api`` (``from rmqcli.broker.timer import api as timer``): ``put_inner(ctl,
inner)`` (any broker-built message, e.g. POP's ck/ack with ``TIMER_DELIVER_MS``),
``put_message(ctl, message)`` (a producer's), both raising ``TimerRefusal``; ``has_trigger(props)``;
``TIMER_TOPIC``; ``run(ctl)``: the delivery service's coroutine. ``ctl`` is the ``BrokerContext``;
every call runs on the broker's event loop.

This ``__init__`` imports nothing (no cycle, not even a type-only one, goes through the package):
``from rmqcli.broker.timer import message`` (or ``config``) runs that module alone, never the put
hook or the service, and so never ``rmqcli.broker.context``.
"""
