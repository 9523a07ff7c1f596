"""The broker's plain ACL (RocketMQ 4.9.x ``PlainAccessValidator``): ``plain_acl.yml`` accounts,
white lists, request signatures and per-resource permissions; the same accounts for the gRPC
calls of 5.x clients, as 5.1.1's proxy checks them (``grpcacl``)."""
