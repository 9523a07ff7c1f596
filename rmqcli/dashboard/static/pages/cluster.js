// Cluster: clusterList's brokers (roles, versions, TPS, disk), then each broker group's members,
// acting master, HA state and controller epochs (getBrokerMemberGroup, haStatus, getBrokerEpoch:
// 5.x requests, which a 4.x broker, or one not in controller mode, does not answer).
import { admin, adminPath, el, section, source, table } from "/static/lib.js";

const tps = (text) => (text ? text.split(" ")[0] : "");
const role = (id) => (id === 0 ? "master" : `slave ${id}`);

export async function render(root) {
  const rows = await admin("clusterList");
  const key = (r, field) => `${r.brokerName}/${r.brokerId}/${field}`;
  root.append(
    section(
      "Brokers",
      table(
        [
          { title: "Cluster", value: (r) => r.cluster },
          { title: "Broker", value: (r) => r.brokerName },
          { title: "BID", value: (r) => r.brokerId, num: true },
          { title: "Role", value: (r) => role(r.brokerId) },
          { title: "Address", value: (r) => r.addr },
          { title: "Version", value: (r) => r.runtime?.brokerVersionDesc },
          { title: "InTPS", value: (r) => tps(r.runtime?.putTps), num: true, key: (r) => key(r, "putTps") },
          { title: "OutTPS", value: (r) => tps(r.runtime?.getTransferedTps), num: true },
          { title: "CommitLog max offset", value: (r) => r.runtime?.commitLogMaxOffset, num: true,
            key: (r) => key(r, "commitLogMaxOffset") },
          { title: "Dispatch behind", value: (r) => r.runtime?.dispatchBehindBytes, num: true },
          { title: "Disk used", value: (r) => r.runtime?.commitLogDiskRatio, num: true,
            key: (r) => key(r, "commitLogDiskRatio") },
          { title: "Today in / out", value: (r) => r.runtime ? `${r.runtime.msgPutTotalTodayNow} / ${r.runtime.msgGetTotalTodayNow}` : "", num: true },
          { title: "Error", value: (r) => r.error || "" },
        ],
        rows,
        { id: "brokers" },
      ),
      source(adminPath("clusterList")),
    ),
  );
  const groups = new Map();
  for (const r of rows) groups.set(`${r.cluster}\u0000${r.brokerName}`, r);
  const states = section("Broker groups");
  root.append(states);
  for (const r of groups.values()) states.append(await groupState(r.cluster, r.brokerName, rows));
}

async function groupState(cluster, brokerName, rows) {
  const box = el("div", { class: "group", dataset: { broker: brokerName } }, el("h3", {}, `${cluster} / ${brokerName}`));
  const memberPath = adminPath("getBrokerMemberGroup", { cluster_name: cluster, broker_name: brokerName });
  try {
    const members = (await admin("getBrokerMemberGroup", { cluster_name: cluster, broker_name: brokerName }, { inline: true }))
      .filter((m) => !m.error);
    const ids = members.map((m) => m.brokerId).sort((a, b) => a - b);
    const acting = ids.length && ids[0] !== 0 ? `yes: broker ${ids[0]} acts as master` : "no";
    box.append(el("p", {}, `Live members: ${ids.join(", ") || "none"} · acting master: ${acting}`));
  } catch (exc) {
    box.append(el("p", { class: "note" }, `members: ${exc.message}`));
  }
  box.append(source(memberPath));
  for (const master of rows.filter((r) => r.brokerName === brokerName && r.brokerId === 0)) {
    try {
      const [status] = await admin("haStatus", { broker_addr: master.addr }, { inline: true });
      const info = status.info || {};
      const connections = info.haConnectionInfo || [];
      box.append(
        el("p", {}, `HA: ${connections.length} slave connection(s), ${info.inSyncSlaveNums ?? 0} in sync`),
        table(
          [
            { title: "Slave", value: (c) => c.addr },
            { title: "Ack offset", value: (c) => c.slaveAckOffset, num: true },
            { title: "Gap (bytes)", value: (c) => c.diff, num: true, key: (c) => `${brokerName}/${c.addr}/diff` },
            { title: "In sync", value: (c) => String(c.inSync) },
          ],
          connections,
        ),
      );
    } catch (exc) {
      box.append(el("p", { class: "note" }, `HA: ${exc.message}`));
    }
  }
  box.append(await epochs(brokerName));
  return box;
}

// Controller mode: each member's epochs (the last one is the current master's term).
async function epochs(brokerName) {
  const options = { broker_name: brokerName };
  try {
    const rows = await admin("getBrokerEpoch", options, { inline: true });
    const last = (r) => r.cache.epochList[r.cache.epochList.length - 1] || {};
    return el("div", {},
      el("p", {}, "Controller epochs"),
      table(
        [
          { title: "Broker", value: (r) => r.addr },
          { title: "Id", value: (r) => r.cache.brokerId, num: true },
          { title: "Epoch", value: (r) => last(r).epoch, num: true, key: (r) => `${brokerName}/${r.addr}/epoch` },
          { title: "Since offset", value: (r) => last(r).startOffset, num: true, key: (r) => `${brokerName}/${r.addr}/epochStart` },
          { title: "Max offset", value: (r) => r.cache.maxOffset, num: true },
          { title: "Epochs", value: (r) => r.cache.epochList.length, num: true },
        ],
        rows,
        { class: "epochs" },
      ),
      source(adminPath("getBrokerEpoch", options)));
  } catch (exc) {
    return el("p", { class: "note" }, `controller epochs: not in controller mode (${exc.message})`);
  }
}
