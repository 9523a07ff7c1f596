// Store inspector over the --store directories: #/store lists them; #/store/<index or path> shows
// one store's files (/api/store/…/files) and what rmq stats, lag, delay-report and tx-report print
// with --json for it; verify runs on demand (it reads the whole store). A report that fails shows
// its one line in its section and in #error, and the page stays for the others (verify above all).
import { api, el, link, section, showError, source, table } from "/static/lib.js";

const SHOWN = 1000; // rows of one table drawn at most (the endpoint has them all)

export async function render(root, ref, info) {
  if (ref === null || ref === "") return storeList(root, info);
  const path = (report, query = {}) => reportPath(ref, report, query);
  const files = await api(path("files")); // a store not given: refused here, the page shows why
  root.append(el("h1", {}, files.store), filesSection(files, path("files")));
  let failed = false;
  const report = async (title, name, draw) => {
    const box = section(title);
    root.append(box);
    try {
      box.append(...draw(await api(path(name))), source(path(name)));
    } catch (exc) {
      box.append(el("p", { class: "note", dataset: { error: name } }, exc.message), source(path(name)));
      if (!failed) showError(exc.message); // the first failure's line stays in #error
      failed = true;
    }
  };
  await report("Stats (rmq stats --json)", "stats", statsParts);
  root.append(verifySection(path));
  await report("Consumer lag (rmq lag --json)", "lag", (rows) => [
    rowsTable(rows, "lag", (r) => `${r.group}/${r.topic}/${r.queueId}`, { id: "lag" }),
  ]);
  await report("Delay levels (rmq delay-report --json)", "delay", (rows) => [
    rowsTable(rows, "delay", (r) => r.level, { id: "delay" }),
  ]);
  await report("Transactions (rmq tx-report --json)", "tx", (rows) => [
    rows.length ? rowsTable(rows, "tx", (r) => `${r.state}/${r.queueOffset}`, { id: "tx" }) : el("p", {}, "none open, none given up on"),
  ]);
}

function storeList(root, info) {
  const rows = info.stores.map((path, index) => ({ index, path }));
  root.append(
    section(
      "Stores",
      rows.length
        ? table(
            [
              { title: "#", value: (s) => s.index, num: true },
              { title: "Directory", value: (s) => link(`#/store/${s.index}`, s.path), key: (s) => `store/${s.index}` },
            ],
            rows,
            { id: "stores" },
          )
        : el("p", { class: "note" }, "no store given: start rmq dashboard with --store DIR"),
      source("/api/stores"),
    ),
  );
}

function reportPath(ref, report, query) {
  const params = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== ""));
  if (/^\d+$/.test(ref)) {
    const text = params.toString();
    return `/api/store/${ref}/${report}` + (text ? `?${text}` : "");
  }
  params.set("store", ref);
  return `/api/store/${report}?${params}`;
}

const cellText = (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : v);

// A table of every field of `rows` (at most SHOWN drawn); cell data-key `${prefix}/${keyOf(row)}/${field}`.
function rowsTable(rows, prefix, keyOf, attrs = {}) {
  const fields = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const drawn = rows.slice(0, SHOWN);
  return el(
    "div",
    {},
    table(
      fields.map((f) => ({
        title: f,
        value: (r) => cellText(r[f]),
        num: drawn.some((r) => typeof r[f] === "number"),
        key: (r) => `${prefix}/${keyOf(r)}/${f}`,
      })),
      drawn,
      attrs,
    ),
    rows.length > SHOWN ? el("p", { class: "note" }, `${SHOWN} of ${rows.length} rows drawn: every one is in the JSON`) : null,
  );
}

// One mapping as a two-column table; value cells carry data-key `${prefix}/${field}`.
function itemTable(item, prefix, attrs = {}) {
  const pairs = Object.entries(item).map(([field, value]) => ({ field, value }));
  return table(
    [
      { title: "Field", value: (p) => p.field },
      { title: "Value", value: (p) => cellText(p.value), num: true, key: (p) => `${prefix}/${p.field}` },
    ],
    pairs,
    attrs,
  );
}

function filesSection(files, path) {
  const bounded = (title, listing, prefix, keyOf) => [
    el("h3", {}, title),
    el("p", { class: "note" }, `${listing.total} (${listing.bytes} bytes)` + (listing.shown < listing.total ? `; the first ${listing.shown} listed` : "")),
    listing.rows.length ? rowsTable(listing.rows, prefix, keyOf) : null,
  ];
  return section(
    "Files",
    rowsTable(files.kinds, "files", (k) => k.kind, { id: "files" }),
    bounded("CommitLog", files.commitlog, "files/commitlog", (f) => f.name),
    bounded("Consume queues (per topic and queue)", files.queues, "files/queue", (q) => `${q.topic}/${q.queueId}`),
    bounded("Index", files.index, "files/index", (f) => f.name),
    bounded("Config", files.config, "files/config", (f) => f.name),
    files.other.total ? bounded("Other entries", files.other, "files/other", (f) => f.name) : null,
    source(path),
  );
}

function statsParts(stats) {
  const parts = [
    el("h3", {}, "CommitLog"),
    itemTable(stats.commitlog, "stats/commitlog", { id: "stats-commitlog" }),
    el("h3", {}, "Topics"),
    rowsTable(stats.topics, "stats/topic", (t) => t.topic, { id: "stats-topics" }),
    el("h3", {}, "Queues"),
    rowsTable(stats.queues, "stats/queue", (q) => `${q.topic}/${q.queueId}`, { id: "stats-queues" }),
    el("h3", {}, "Files by kind"),
    rowsTable(stats.files, "stats/files", (f) => f.kind, { id: "stats-files" }),
  ];
  if (stats.unsafeTopics) {
    parts.push(el("h3", {}, "Topics that cannot name a consume-queue directory"),
      rowsTable(stats.unsafeTopics, "stats/unsafe", (t) => t.topic));
  }
  if (stats.confirm) {
    parts.push(el("h3", {}, "Confirm offset (controller mode)"), itemTable(stats.confirm, "stats/confirm"),
      el("h3", {}, "Past confirmPhyOffset (not counted above)"),
      rowsTable(stats.unconfirmed, "stats/unconfirmed", (q) => `${q.topic}/${q.queueId}`));
  }
  return parts;
}

function verifySection(path) {
  const crc = el("input", { type: "checkbox", id: "verify-crc", checked: "" });
  const button = el("button", { type: "submit", id: "verify-run" }, "Verify the store");
  const status = el("p", { class: "note", id: "verify-status" }, "reads every file of the store: it may take a while");
  const result = el("div", { id: "verify-result" });
  const form = el("form", { id: "verify" }, el("label", {}, crc, " recompute body CRCs"), button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const where = path("verify", { crc: crc.checked ? "true" : "false" });
    button.disabled = true;
    status.textContent = "verifying…";
    result.replaceChildren();
    delete result.dataset.state;
    try {
      const doc = await api(where);
      const s = doc.summary;
      const at = new Map(doc.problems.map((p, i) => [p, i]));
      status.textContent = `${s.errors ? "CORRUPT" : "OK"}: ${s.errors} error(s), ${s.warnings} warning(s)` +
        (s.omitted ? `, ${s.omitted} not listed` : "");
      result.append(
        ...[
          itemTable(s, "verify/summary", { id: "verify-summary" }),
          doc.kinds.length ? rowsTable(doc.kinds, "verify/kind", (k) => `${k.severity}/${k.kind}`, { id: "verify-kinds" }) : null,
          doc.problems.length ? rowsTable(doc.problems, "verify/problem", (p) => at.get(p), { id: "verify-problems" }) : null,
          source(where),
        ].filter(Boolean),
      );
      result.dataset.state = "done";
    } catch (exc) {
      status.textContent = exc.message;
      showError(exc.message);
      result.dataset.state = "error";
    } finally {
      button.disabled = false;
    }
  });
  return section("Verify (rmq verify --json)", form, status, result);
}
