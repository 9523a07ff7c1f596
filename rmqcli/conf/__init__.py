"""Design note: broker.conf, one table of its keys (``keys``) read by one parser (``parse``).

``keys.TABLE`` has a row (``keys.Key``) for every key rmq knows: each key of RocketMQ 4.9.8's
``BrokerConfig``, ``MessageStoreConfig``, ``NettyServerConfig`` and ``NettyClientConfig`` (what a
4.9.8 broker reports for GET_BROKER_CONFIG), the 5.1.1 keys rmq implements, and rmq's own keys
(``rmq...``, ``timerMaxPending``). A row gives the key as RocketMQ spells it, its Java type, its
default (4.9.8's; 5.1.1's for a 5.x key), its owner (the part of rmq that reads it; none: rmq does
not implement it), the range rmq takes, and how the broker treats it after start (``at_start``:
UPDATE_BROKER_CONFIG refuses it; ``shown``: GET_BROKER_CONFIG reports it).

``parse`` reads a file once (``load``: a ``BrokerConf``, the file as read, its values typed on
demand) with the Java broker's rules (``parse_value``; a bad value is one ``UsageError`` line
naming the key). Everything else derives from the table: the typed views (``BrokerConfig``,
``StoreSettings``, ``HAConfig``, ``ActingConfig``, ``RetentionConfig``, ``PopConfig``,
``TimerConfig``, ``SigningKeys``) declare each attribute with ``keys.setting(name)``, which takes
its default from the row, and are filled by ``BrokerConf.values``; GET_BROKER_CONFIG's report and
refusals (``rmqcli.broker.admin.config``), the NameServer's keys (``rmqcli.namesrv.server``), ``rmq serve``'s
limits and its warning about keys rmq does not implement (``BrokerConf.unimplemented``). The
offline store commands read their ``--config`` through the same parser
(``rmqcli.store.settings``). Rules a row cannot say (``messageDelayLevel``'s list, ``deleteWhen``'s
hours, the role and the broker id) stay with the view that owns the key.

Adding a key: a row in ``keys.TABLE`` (name, type, default, owner, range; ``at_start`` and
``shown`` as the broker treats it), placed with its owner's rows (GET_BROKER_CONFIG reports in
table order); then an attribute ``name: type = setting("theKey")`` in the owner's view, read where
the broker acts on it. A key rmq does not implement yet is a row without an owner (its value is
then only shown as given, and named at start). This package imports nothing of rmq but
``rmqcli.errors``: every part may use it.
"""
