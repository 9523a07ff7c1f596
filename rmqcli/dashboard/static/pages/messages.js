// Messages: search a topic by store time (/api/messages, bounded by `limit`), or look messages up by
// key (queryMsgByKey) or by id (queryMsgById: an offset message id or a unique key); each message
// found shows its fields, properties, body (/api/messages/body), consumer tracks and trace
// (/api/messages/trace). The argument is a query string: #/messages/topic=T&begin=ms&end=ms&limit=N,
// #/messages/topic=T&key=K, #/messages/id=ID[&topic=T].
import { admin, adminPath, api, ApiError, el, link, section, showError, source, table } from "/static/lib.js";

const DEFAULT_LIMIT = 64;
const MAX_LIMIT = 512;
const BODY_DETAILS = 8; // messages of a key look-up whose body is fetched at once
const HEX_SHOWN = 256; // bytes of a binary body shown as hex
const FIELDS = [
  "msgId", "offsetMsgId", "topic", "brokerName", "queueId", "queueOffset", "commitLogOffset", "storeSize",
  "sysFlag", "flag", "bodyCRC", "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
  "preparedTransactionOffset", "tags", "keys",
];

export function hashOf(options) {
  const query = new URLSearchParams(Object.entries(options).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  return "#/messages/" + encodeURIComponent(query.toString());
}

const time = (ms) => (ms ? new Date(Number(ms)).toISOString() : "");
const text = (value) => (value === null || value === undefined ? "" : String(value));

export async function render(root, argument) {
  const params = new URLSearchParams(argument || "");
  const given = Object.fromEntries(params.entries());
  root.append(el("h1", {}, "Messages"), forms(given));
  try {
    if (given.id) await byId(root, given);
    else if (given.key) await byKey(root, given);
    else if (given.topic) await byTime(root, given);
    else root.append(el("p", { class: "note", id: "hint" }, "Search a topic by store time, or look a message up by key or by id."));
  } catch (exc) {
    // what the server refused or did not find (a garbage id, an unknown topic): its one line, under
    // the forms kept to correct the search
    if (!(exc instanceof ApiError)) throw exc;
    showError(exc.message);
    root.append(el("p", { class: "note", id: "lookup-error" }, exc.message));
  }
}

// --- the three forms -----------------------------------------------------------------------------
function localInput(name, ms) {
  const input = el("input", { type: "datetime-local", step: "1", name, title: "empty: from the first / to now" });
  if (ms !== undefined && ms !== "") {
    const d = new Date(Number(ms));
    if (!Number.isNaN(d.getTime())) input.value = new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  }
  return input;
}

function millis(input) {
  return input.value ? String(new Date(input.value).getTime()) : undefined;
}

function forms(given) {
  const searching = !given.id && !given.key;
  const hour = Date.now() - 3600 * 1000;
  const topic = el("input", { name: "topic", placeholder: "topic", required: "", value: searching ? given.topic || "" : "" });
  const begin = localInput("begin", searching && given.topic ? given.begin : String(hour));
  const end = localInput("end", searching ? given.end : undefined);
  const limit = el("input", { name: "limit", type: "number", min: "1", max: String(MAX_LIMIT), value: given.limit || DEFAULT_LIMIT, title: `at most ${MAX_LIMIT}` });
  const byTimeForm = el("form", { id: "search-time" }, "Topic", topic, "stored from", begin, "to", end, "at most", limit,
    el("button", { type: "submit" }, "Search"));
  byTimeForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = hashOf({ topic: topic.value.trim(), begin: millis(begin), end: millis(end), limit: limit.value });
  });

  const keyTopic = el("input", { name: "topic", placeholder: "topic", required: "", value: given.key ? given.topic || "" : "" });
  const key = el("input", { name: "key", placeholder: "message key", required: "", value: given.key || "" });
  const byKeyForm = el("form", { id: "search-key" }, "Topic", keyTopic, "key", key, el("button", { type: "submit" }, "Find by key"));
  byKeyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = hashOf({ topic: keyTopic.value.trim(), key: key.value.trim() });
  });

  const id = el("input", { name: "id", placeholder: "message id (offset id or unique key)", size: "40", required: "", value: given.id || "" });
  const idTopic = el("input", { name: "topic", placeholder: "topic (optional)", value: given.id ? given.topic || "" : "" });
  const byIdForm = el("form", { id: "search-id" }, "Id", id, "topic", idTopic, el("button", { type: "submit" }, "Find by id"));
  byIdForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = hashOf({ id: id.value.trim(), topic: idTopic.value.trim() });
  });
  return section("Search", byTimeForm, byKeyForm, byIdForm);
}

// --- by topic and store time ---------------------------------------------------------------------
async function byTime(root, given) {
  const options = { topic: given.topic, begin: given.begin, end: given.end, limit: given.limit };
  const query = new URLSearchParams(Object.entries(options).filter(([, v]) => v !== undefined && v !== ""));
  const path = `/api/messages?${query}`;
  const found = await api(path);
  const summary = el("p", {},
    el("span", { id: "found-count", dataset: { key: "search/count" } }, found.messages.length),
    ` messages of ${found.topic} stored from ${found.begin ? time(found.begin) : "the first"} to ${time(found.end)}, newest first`,
    el("span", { hidden: "", dataset: { key: "search/truncated" } }, String(found.truncated)));
  const children = [summary];
  if (found.truncated) {
    children.push(el("p", { class: "note", id: "truncated", style: "color: #8a5a00" },
      `Only the first ${found.limit} messages are shown: the range holds about ${found.unread} more (read in turns from each queue, oldest first). `
      + `Narrow the time range${found.limit < MAX_LIMIT ? `, or raise the limit (at most ${MAX_LIMIT})` : ""}.`));
  }
  children.push(table(
    [
      { title: "Message id", value: (m) => link(hashOf({ id: m.offsetMsgId, topic: found.topic }), m.msgId), key: (m) => `list/${m.offsetMsgId}/msgId` },
      { title: "Broker", value: (m) => m.brokerName },
      { title: "Queue", value: (m) => m.queueId, num: true, key: (m) => `list/${m.offsetMsgId}/queueId` },
      { title: "Offset", value: (m) => m.queueOffset, num: true, key: (m) => `list/${m.offsetMsgId}/queueOffset` },
      { title: "Store time", value: (m) => time(m.storeTimestamp), key: (m) => `list/${m.offsetMsgId}/storeTime` },
      { title: "Keys", value: (m) => m.keys, key: (m) => `list/${m.offsetMsgId}/keys` },
      { title: "Tags", value: (m) => m.tags, key: (m) => `list/${m.offsetMsgId}/tags` },
      { title: "Body bytes", value: (m) => m.bodySize, num: true, key: (m) => `list/${m.offsetMsgId}/bodySize` },
      { title: "Born host", value: (m) => m.bornHost, key: (m) => `list/${m.offsetMsgId}/bornHost` },
    ],
    found.messages,
    { id: "messages" },
  ));
  children.push(el("details", {}, el("summary", {}, "Queues read"), table(
    [
      { title: "Broker", value: (q) => q.brokerName },
      { title: "Queue", value: (q) => q.queueId, num: true },
      { title: "Offset of begin", value: (q) => q.beginOffset, num: true },
      { title: "Offset of end", value: (q) => q.endOffset, num: true },
      { title: "Read up to", value: (q) => q.nextOffset, num: true },
    ],
    found.queues,
  )));
  root.append(section("Found", ...children, source(path)));
}

// --- by key and by id ----------------------------------------------------------------------------
async function byKey(root, given) {
  if (!given.topic) throw new Error("a look-up by key needs the topic");
  const options = { topic: given.topic, msg_key: given.key };
  const found = await admin("queryMsgByKey", options);
  root.append(section(
    `Key ${given.key} in ${given.topic}`,
    el("p", {}, el("span", { dataset: { key: "key/count" } }, found.length), " messages (at most 64, as queryMsgByKey)"),
    table(
      [
        { title: "Message id", value: (m) => link(hashOf({ id: m.offsetMsgId, topic: m.topic }), m.msgId), key: (m) => `list/${m.offsetMsgId}/msgId` },
        { title: "Queue", value: (m) => m.queueId, num: true, key: (m) => `list/${m.offsetMsgId}/queueId` },
        { title: "Offset", value: (m) => m.queueOffset, num: true, key: (m) => `list/${m.offsetMsgId}/queueOffset` },
        { title: "Store time", value: (m) => time(m.storeTimestamp) },
        { title: "Tags", value: (m) => m.tags, key: (m) => `list/${m.offsetMsgId}/tags` },
        { title: "Keys", value: (m) => m.keys, key: (m) => `list/${m.offsetMsgId}/keys` },
      ],
      found,
      { id: "messages" },
    ),
    source(adminPath("queryMsgByKey", options)),
  ));
  for (const [i, m] of found.entries()) root.append(await messageSection(m, i < BODY_DETAILS));
}

async function byId(root, given) {
  const options = { msg_id: given.id, topic: given.topic };
  const views = await admin("queryMsgById", options);
  for (const view of views) {
    const part = await messageSection(view.message, true);
    part.append(tracks(view.tracks), await trace(view.message.msgId));
    root.append(part);
  }
  root.append(source(adminPath("queryMsgById", options)));
}

async function messageSection(m, withBody) {
  const id = m.offsetMsgId;
  const fields = table(
    [
      { title: "Field", value: (f) => f },
      { title: "Value", value: (f) => text(m[f]), key: (f) => `msg/${id}/${f}` },
      { title: "", value: (f) => (f.endsWith("Timestamp") ? time(m[f]) : "") },
    ],
    FIELDS,
    { class: "fields" },
  );
  const props = table(
    [
      { title: "Property", value: ([k]) => k },
      { title: "Value", value: ([, v]) => v, key: ([k]) => `prop/${id}/${k}` },
    ],
    Object.entries(m.properties || {}),
    { class: "properties" },
  );
  const part = section(`Message ${m.msgId}`, fields, el("h3", {}, "Properties"), props, el("h3", {}, "Body"));
  part.dataset.msg = id;
  part.append(withBody ? await body(id) : el("p", { class: "note" }, "open the message by its id to see its body: ", link(hashOf({ id, topic: m.topic }), id)));
  return part;
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
}

async function body(offsetMsgId) {
  const path = `/api/messages/body?offset_msg_id=${encodeURIComponent(offsetMsgId)}`;
  let found;
  try {
    found = await api(path);
  } catch (exc) {
    return el("p", { class: "note", dataset: { key: `bodyError/${offsetMsgId}` } }, `body not read: ${exc.message}`);
  }
  const parts = [];
  const cut = found.truncated ? ` (the first ${found.shown} of ${found.size} bytes)` : "";
  if (found.encoding === "utf-8") {
    parts.push(el("p", { class: "note" }, `${found.size} bytes of UTF-8 text${cut}`));
    parts.push(el("pre", { class: "body", dataset: { key: `body/${offsetMsgId}`, encoding: "utf-8" } }, found.text));
  } else {
    const bytes = Uint8Array.from(atob(found.text), (c) => c.charCodeAt(0));
    parts.push(el("p", { class: "note" }, `${found.size} bytes, not UTF-8: shown as hex (the first ${Math.min(HEX_SHOWN, bytes.length)} bytes) and base64${cut}`));
    parts.push(el("pre", { class: "body hex", dataset: { key: `hex/${offsetMsgId}` } }, hex(bytes.slice(0, HEX_SHOWN))));
    parts.push(el("pre", { class: "body", dataset: { key: `body/${offsetMsgId}`, encoding: "base64" } }, found.text));
  }
  return el("div", {}, ...parts, source(path));
}

function tracks(list) {
  const part = el("div", {}, el("h3", {}, "Consumer groups"));
  if (list === null || list === undefined) part.append(el("p", { class: "note" }, "not asked"));
  else if (!list.length) part.append(el("p", { class: "note" }, "no consumer group subscribes to this topic"));
  else {
    part.append(table(
      [
        { title: "Group", value: (t) => t.consumerGroup },
        { title: "Track", value: (t) => t.trackType, key: (t) => `track/${t.consumerGroup}` },
        { title: "Detail", value: (t) => t.exceptionDesc },
      ],
      list,
      { class: "tracks" },
    ));
  }
  return part;
}

async function trace(msgId) {
  const path = `/api/messages/trace?msg_id=${encodeURIComponent(msgId)}`;
  const found = await api(path);
  const part = el("div", { id: "trace" }, el("h3", {}, "Trace"));
  if (found.note) part.append(el("p", { class: "note", id: "trace-note" }, `no trace: ${found.note}`));
  if (found.trace.length) {
    part.append(table(
      [
        { title: "Type", value: (t) => t.msgType },
        { title: "Group", value: (t) => t.groupName },
        { title: "Client host", value: (t) => t.clientHost },
        { title: "Time", value: (t) => time(t.timeStamp) },
        { title: "Cost (ms)", value: (t) => t.costTime, num: true },
        { title: "Status", value: (t) => t.status },
        { title: "Topic", value: (t) => t.topic },
        { title: "Tags", value: (t) => t.tags },
        { title: "Keys", value: (t) => t.keys },
      ],
      found.trace,
      { class: "trace" },
    ));
  }
  part.append(source(path));
  return part;
}
