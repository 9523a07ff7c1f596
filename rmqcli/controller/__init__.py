"""RocketMQ 5.1.1's controller mode (controller.md): the controller's events and their DLedger entry
bodies, its replicated state with the request checks, the election policy and the heartbeat table.
Pure logic: no sockets, no threads; time comes from an injected clock."""
