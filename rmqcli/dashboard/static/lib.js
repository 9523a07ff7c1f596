// Shared by the pages: the JSON endpoints, tables, errors and confirmed writes.

export class ApiError extends Error {}

// GET an endpoint's JSON; an answer with {"error": line} throws that line.
export async function api(path) {
  const answer = await fetch(path, { headers: { Accept: "application/json" } });
  const doc = await answer.json();
  if (!answer.ok || (doc && typeof doc === "object" && !Array.isArray(doc) && "error" in doc)) {
    throw new ApiError(doc && doc.error ? doc.error : `${path}: HTTP ${answer.status}`);
  }
  return doc;
}

export async function post(path, body) {
  const answer = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
  const doc = await answer.json();
  if (!answer.ok || "error" in doc) throw new ApiError(doc.error || `${path}: HTTP ${answer.status}`);
  return doc;
}

// The admin endpoint of mqadmin command `name` with its options (parameter names).
export function adminPath(name, options = {}) {
  const query = new URLSearchParams(Object.entries(options).filter(([, v]) => v !== undefined && v !== ""));
  const text = query.toString();
  return `/api/admin/${name}` + (text ? `?${text}` : "");
}

// `inline`: a section that may fail (a broker without the request) gets its error line with a 200
// answer, which the browser does not report in its console.
export function admin(name, options = {}, { inline = false } = {}) {
  return api(adminPath(name, inline ? { ...options, _errors: "inline" } : options));
}

export function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = false;
}

export function clearError() {
  const box = document.getElementById("error");
  box.textContent = "";
  box.hidden = true;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A table: columns [{title, value(row), num?, key?(row)}]; a cell with `key` carries data-key.
export function table(columns, rows, attrs = {}) {
  const head = el("tr", {}, columns.map((c) => el("th", {}, c.title)));
  const body = rows.map((row) =>
    el("tr", {}, columns.map((c) => {
      const value = c.value(row);
      const cell = el("td", c.num ? { class: "num" } : {}, value instanceof Node ? value : value ?? "");
      if (c.key) cell.dataset.key = c.key(row);
      return cell;
    })),
  );
  return el("table", attrs, el("thead", {}, head), el("tbody", {}, body));
}

export function source(path) {
  return el("p", { class: "source" }, "data: ", el("a", { href: path }, path));
}

export function section(title, ...children) {
  return el("section", {}, el("h2", {}, title), ...children);
}

// One admin command's document as a table (its `rows` picked from it) under `title`, with its
// source: {doc, node}.
export async function adminTable(title, name, options, columns, { id, rows = (doc) => doc } = {}) {
  const doc = await admin(name, options);
  const node = section(title, table(columns, rows(doc), { id }), source(adminPath(name, options)));
  return { doc, node };
}

// A write: the server's plan (the command it will run), confirmed by the user, then run.
export async function confirmedWrite(name, options) {
  const { plan } = await post(`/api/admin/${name}`, { options, confirm: false });
  if (!window.confirm(`This will run:\n\n${plan}\n\nGo on?`)) return null;
  return (await post(`/api/admin/${name}`, { options, confirm: true })).done;
}

export function link(hash, text) {
  return el("a", { href: hash }, text);
}
