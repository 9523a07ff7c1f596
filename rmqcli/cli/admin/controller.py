"""5.1.1's controller commands (controller mode, ``rmqcli.admin.controller``): mqadmin's names,
options and text; ``-a`` names the controllers, not the name server."""

from __future__ import annotations

from rmqcli.cli.admin.registry import Args, Family, Lazy, cluster_name, opt, required
from rmqcli.errors import UsageError

operations = Lazy("rmqcli.admin.controller")
texts = Lazy("rmqcli.cli.admin.format_controller")
CONTROLLER = Family(operations, texts, "controller")
ADDRESS = required("controller_address", "--controllerAddress", "-a", "the address of controller")


def no_namesrv(_args: Args) -> bool:
    return False


def _broker_name_or_cluster(args: Args) -> None:
    if not args.broker_name and not args.cluster_name:
        raise UsageError("one of -b/--brokerName or -c/--clusterName is required")


get_controller_meta_data = CONTROLLER.command(
    "getControllerMetaData",
    "Get controller cluster's metadata",
    (ADDRESS,),
    namesrv=no_namesrv,
)

get_sync_state_set = CONTROLLER.command(
    "getSyncStateSet",
    "Fetch syncStateSet for target brokers",
    (
        ADDRESS,
        cluster_name("which cluster"),
        opt("broker_name", "--brokerName", "-b", "which broker to fetch"),
        opt("interval", "--interval", "-i", "the interval(second) of get info", int),
    ),
    params=("controller_address", "broker_name", "cluster_name"),
    check=_broker_name_or_cluster,
    namesrv=lambda a: not a.broker_name,
    repeat=lambda a: (a.interval, 0),
)

get_controller_config = CONTROLLER.command(
    "getControllerConfig",
    "Get controller config.",
    (ADDRESS,),
    namesrv=no_namesrv,
)

update_controller_config = CONTROLLER.command(
    "updateControllerConfig",
    "Update controller config.",
    (
        ADDRESS,
        required("key", "--key", "-k", "config key"),
        required("value", "--value", "-v", "config value"),
    ),
    namesrv=no_namesrv,
    text=lambda addrs, a: texts.update_controller_config(addrs, a.key.strip(), a.value.strip()),
)

elect_master = CONTROLLER.command(
    "electMaster",
    "Re-elect the specified broker as master.",
    (
        ADDRESS,
        required("cluster_name", "--clusterName", "-c", "the clusterName of broker"),
        required("broker_name", "--brokerName", "-bn", "the brokerName of broker"),
        required("broker_id", "--brokerId", "-b", "the brokerId of broker which will be elected as master"),
    ),
    namesrv=no_namesrv,
)

clean_broker_metadata = CONTROLLER.command(
    "cleanBrokerMetadata",
    "Clean metadata of broker on controller.",
    (
        ADDRESS,
        required("broker_name", "--brokerName", "-bn", "the broker name of broker to clean"),
        cluster_name("the clusterName of broker"),
        opt("broker_controller_ids_to_clean", "--brokerControllerIdsToClean", "-b",
            "the brokerController id list which requires to clean metadata. eg: 1;2;3, means that "
            "clean broker-id-1, broker-id-2 and broker-id-3"),
        opt("clean_living_broker", "--cleanLivingBroker", "-l",
            "whether clean up broker metadata when the broker is still alive, default is false", bool, False),
    ),
    params=("controller_address", "cluster_name", "broker_name", "broker_controller_ids_to_clean",
            "clean_living_broker"),
    namesrv=no_namesrv,
)  # fmt: skip
