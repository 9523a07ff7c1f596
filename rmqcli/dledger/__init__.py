"""DLedger (openmessaging/dledger 0.3.1.2, as RocketMQ 4.9.8's DLedger CommitLog uses it): the
peers' RPC over the RocketMQ remoting protocol."""
