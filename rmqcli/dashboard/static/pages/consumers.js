// Consumer groups: consumerProgress without -g (every %RETRY% group: clients, model, TPS, diff).
import { adminTable, link } from "/static/lib.js";

export async function render(root) {
  const groups = await adminTable(
    "Consumer groups",
    "consumerProgress",
    {},
    [
      { title: "Group", value: (g) => link(`#/consumer/${encodeURIComponent(g.group)}`, g.group) },
      { title: "Count", value: (g) => g.count, num: true },
      { title: "Version", value: (g) => g.version },
      { title: "Type", value: (g) => g.type },
      { title: "Model", value: (g) => g.model },
      { title: "TPS", value: (g) => g.tps, num: true },
      { title: "Diff total", value: (g) => g.diffTotal, num: true, key: (g) => `${g.group}/diffTotal` },
    ],
    { id: "groups" },
  );
  root.append(groups.node);
}
