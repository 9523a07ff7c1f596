"""A broker in controller mode (RocketMQ 5.1.1 ``ReplicasManager`` + ``AutoSwitchHAService``,
docs/controller.md §5-§7): its identity and epochs on disk (``identity``, ``epochs``), the
AutoSwitchHA protocol on the HA port (``hamaster``, ``haslave``), the talk with the controller
(``replicas``), and the broker's replication object over all of them (``replication``)."""
