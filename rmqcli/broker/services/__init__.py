"""Design note: the broker's store engine and the background services over it (RocketMQ's
``DefaultMessageStore`` and the services it or ``BrokerController`` schedules).

- ``messagestore``: puts, reads and the reput of a live store over ``rmqcli.store.write``;
  ``msgext``: a stored record taken back as a message to store again;
- ``schedule``: delayed delivery (``ScheduleMessageService``); ``retention``: the clean-up of old
  CommitLog and consume-queue files (``CleanCommitLogService``, ``CleanConsumeQueueService``);
  ``indexbehind``: the index built behind the CommitLog after a recovery;
- ``tps``: the put/get rates of GET_BROKER_RUNTIME_INFO.

The controller starts and stops them; processors reach them through ``BrokerContext``.
"""
