// The router: #/<page>/<argument> loads pages/<page>.js and calls its render(root, argument, info).
import { api, clearError, el, showError } from "/static/lib.js";

const PAGES = ["cluster", "topics", "topic", "consumers", "consumer", "messages", "store"];
let info = null;
let timers = [];

// A page's repeating work (the lag chart's polling), stopped when another page is shown.
window.rmqEvery = (ms, fn) => timers.push(setInterval(fn, ms));

async function show() {
  timers.forEach(clearInterval);
  timers = [];
  clearError();
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "cluster").split("/");
  const page = PAGES.includes(name) ? name : "cluster";
  const argument = rest.length ? decodeURIComponent(rest.join("/")) : null;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.getAttribute("href").startsWith(`#/${page.replace(/s?$/, "")}`));
  }
  const root = document.getElementById("page");
  root.dataset.state = "loading";
  root.replaceChildren(el("p", { class: "note" }, "loading…"));
  try {
    info = info || (await api("/api/info"));
    document.getElementById("mode").textContent =
      (info.namesrv ? `name server ${info.namesrv} · ` : "") + (info.allowWrites ? "writes allowed" : "read-only");
    const module = await import(`/static/pages/${page}.js`);
    root.replaceChildren();
    await module.render(root, argument, info);
    root.dataset.state = "ready";
  } catch (exc) {
    root.replaceChildren();
    showError(exc.message);
    root.dataset.state = "error";
  }
}

window.addEventListener("hashchange", show);
show();
