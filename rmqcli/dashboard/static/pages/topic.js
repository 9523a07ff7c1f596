// One topic: its route and configuration (topicRoute), its queues' offsets (topicStatus), and a
// test message (sendMessage, a write).
import { adminTable, confirmedWrite, el, section, showError } from "/static/lib.js";

const PERM = { 2: "W", 4: "R", 6: "RW", 0: "none" };

// topicRoute's queue datas, each with its broker's addresses
const withAddresses = (route) =>
  route.queueDatas.map((q) => ({ ...q, addrs: route.brokerDatas.find((b) => b.brokerName === q.brokerName)?.brokerAddrs ?? {} }));

export async function render(root, topic, info) {
  if (!topic) throw new Error("no topic named: open one from the Topics page");
  root.append(el("h1", {}, topic));
  const route = await adminTable(
    "Route and configuration",
    "topicRoute",
    { topic },
    [
      { title: "Broker", value: (q) => q.brokerName },
      { title: "Read queues", value: (q) => q.readQueueNums, num: true, key: (q) => `${q.brokerName}/readQueueNums` },
      { title: "Write queues", value: (q) => q.writeQueueNums, num: true, key: (q) => `${q.brokerName}/writeQueueNums` },
      { title: "Perm", value: (q) => `${q.perm} (${PERM[q.perm] ?? "?"})` },
      { title: "Sys flag", value: (q) => q.topicSysFlag, num: true },
      { title: "Addresses", value: (q) => JSON.stringify(q.addrs) },
    ],
    { id: "route", rows: withAddresses },
  );
  root.append(route.node);
  const status = await adminTable(
    "Status",
    "topicStatus",
    { topic },
    [
      { title: "Broker", value: (s) => s.brokerName },
      { title: "Queue", value: (s) => s.queueId, num: true },
      { title: "Min offset", value: (s) => s.minOffset, num: true, key: (s) => `${s.brokerName}/${s.queueId}/minOffset` },
      { title: "Max offset", value: (s) => s.maxOffset, num: true, key: (s) => `${s.brokerName}/${s.queueId}/maxOffset` },
      { title: "Last updated", value: (s) => (s.lastUpdateTimestamp ? new Date(s.lastUpdateTimestamp).toISOString() : "") },
    ],
    { id: "status" },
  );
  root.append(status.node);
  root.append(sendForm(topic, info));
}

function sendForm(topic, info) {
  const body = el("input", { name: "body", placeholder: "body", value: "hello from rmq dashboard" });
  const key = el("input", { name: "key", placeholder: "keys" });
  const tags = el("input", { name: "tags", placeholder: "tags" });
  const result = el("pre", { id: "send-result", hidden: "" });
  const form = el("form", { id: "send" }, body, key, tags, el("button", { type: "submit" }, "Send a test message"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const done = await confirmedWrite("sendMessage", { topic, body: body.value, key: key.value || undefined, tags: tags.value || undefined });
      if (done) {
        result.textContent = JSON.stringify(done, null, 2);
        result.hidden = false;
      }
    } catch (exc) {
      showError(exc.message);
    }
  });
  return section("Send a test message", info.allowWrites ? null : el("p", { class: "note" }, "read-only: writes are refused (start rmq dashboard with --allow-writes)"), form, result);
}
