// One consumer group: its connections (consumerConnection), per-queue progress (consumerProgress
// -g), its total lag charted over time (/api/lag, sampled by the server), and the writes that move
// its offsets (resetOffsetByTime, skipAccumulatedMessage).
import { admin, adminPath, api, confirmedWrite, el, section, showError, source, table } from "/static/lib.js";

export async function render(root, group, info) {
  if (!group) throw new Error("no group named: open one from the Consumers page");
  root.append(el("h1", {}, group));
  const connections = section("Connections");
  root.append(connections);
  try {
    const conn = await admin("consumerConnection", { consumer_group: group });
    connections.append(
      el("p", {}, `${conn.consumeType ?? ""} ${conn.messageModel ?? ""} ${conn.consumeFromWhere ?? ""}`),
      table(
        [
          { title: "Client id", value: (c) => c.clientId },
          { title: "Address", value: (c) => c.clientAddr },
          { title: "Language", value: (c) => c.language },
          { title: "Version", value: (c) => c.version, num: true },
        ],
        conn.connectionSet || [],
        { id: "connections" },
      ),
    );
  } catch (exc) {
    connections.append(el("p", { class: "note", id: "connections-error" }, exc.message));
  }
  connections.append(source(adminPath("consumerConnection", { consumer_group: group })));

  const progress = await admin("consumerProgress", { group_name: group });
  const rows = progress.queues || [];
  root.append(
    section(
      "Progress",
      el("p", {}, `consume TPS ${progress.consumeTps} · diff total `,
        el("span", { id: "diff-total" }, progress.diffTotal)),
      table(
        [
          { title: "Topic", value: (r) => r.topic },
          { title: "Broker", value: (r) => r.brokerName },
          { title: "Queue", value: (r) => r.queueId, num: true },
          { title: "Broker offset", value: (r) => r.brokerOffset, num: true, key: (r) => `${r.topic}/${r.brokerName}/${r.queueId}/brokerOffset` },
          { title: "Consumer offset", value: (r) => r.consumerOffset, num: true, key: (r) => `${r.topic}/${r.brokerName}/${r.queueId}/consumerOffset` },
          { title: "Diff", value: (r) => r.diff, num: true, key: (r) => `${r.topic}/${r.brokerName}/${r.queueId}/diff` },
          { title: "Last time", value: (r) => (r.lastTimestamp ? new Date(r.lastTimestamp).toISOString() : "") },
        ],
        rows,
        { id: "progress" },
      ),
      source(adminPath("consumerProgress", { group_name: group })),
    ),
  );
  root.append(lagChart(group, info));
  const topics = [...new Set(rows.map((r) => r.topic).filter((t) => !t.startsWith("%RETRY%")))];
  root.append(offsetForms(group, topics));
}

function lagChart(group, info) {
  const canvas = el("canvas", { id: "lag-chart" });
  const note = el("p", { class: "note" }, `total lag, sampled every ${info.lagInterval} s while this page is open`);
  const chart = new window.Chart(canvas, {
    type: "line",
    data: { labels: [], datasets: [{ label: `${group} lag (messages)`, data: [], borderColor: "#1f77b4", tension: 0 }] },
    options: { animation: false, responsive: true, maintainAspectRatio: false, scales: { y: { beginAtZero: true } } },
  });
  const path = `/api/lag?group=${encodeURIComponent(group)}`;
  const refresh = async () => {
    try {
      const { points } = await api(path);
      chart.data.labels = points.map((p) => new Date(p.t).toLocaleTimeString());
      chart.data.datasets[0].data = points.map((p) => p.lag);
      chart.update();
      canvas.dataset.points = JSON.stringify(points.map((p) => p.lag));
    } catch (exc) {
      showError(exc.message);
    }
  };
  refresh();
  window.rmqEvery(Math.max(500, info.lagInterval * 1000), refresh);
  return section("Lag over time", note, el("div", { class: "chart" }, canvas), source(path));
}

function offsetForms(group, topics) {
  const topic = el("select", { name: "topic" }, topics.map((t) => el("option", { value: t }, t)));
  const when = el("input", { name: "timestamp", placeholder: "now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS", value: "now" });
  const result = el("pre", { id: "offset-result", hidden: "" });
  const run = (name, options) => async (event) => {
    event.preventDefault();
    try {
      const done = await confirmedWrite(name, options());
      if (done) {
        result.textContent = JSON.stringify(done, null, 2);
        result.hidden = false;
      }
    } catch (exc) {
      showError(exc.message);
    }
  };
  const reset = el("form", { id: "reset" }, topic, when, el("button", { type: "submit" }, "Reset offsets to this time"));
  reset.addEventListener("submit", run("resetOffsetByTime", () => ({ group, topic: topic.value, timestamp: when.value })));
  const skip = el("form", { id: "skip" }, el("button", { type: "submit" }, "Skip accumulated messages (of the topic above)"));
  skip.addEventListener("submit", run("skipAccumulatedMessage", () => ({ group, topic: topic.value })));
  return section("Move offsets", reset, skip, result);
}
