"""The broker's plain ACL (RocketMQ 4.9.x ``PlainAccessValidator``): ``plain_acl.yml`` accounts,
white lists, request signatures and per-resource permissions."""
