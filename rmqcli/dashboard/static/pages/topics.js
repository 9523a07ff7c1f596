// Topics: topicList, filtered as one types; each links to its page.
import { admin, adminPath, el, link, section, source, table } from "/static/lib.js";

const SYSTEM = /^(RMQ_SYS_|rmq_sys_|SCHEDULE_TOPIC_XXXX$|TBW102$|OFFSET_MOVED_EVENT$|SELF_TEST_TOPIC$|%RETRY%|%DLQ%|TRANS_CHECK_MAX_TIME_TOPIC$)/;

export async function render(root) {
  const topics = await admin("topicList");
  const filter = el("input", { placeholder: "filter", id: "topic-filter" });
  const holder = el("div");
  const draw = () => {
    const shown = topics.filter((t) => t.includes(filter.value)).sort();
    holder.replaceChildren(
      table(
        [
          { title: "Topic", value: (t) => link(`#/topic/${encodeURIComponent(t)}`, t), key: (t) => t },
          { title: "Kind", value: (t) => (t.startsWith("%RETRY%") ? "retry" : t.startsWith("%DLQ%") ? "DLQ" : SYSTEM.test(t) ? "system" : "normal") },
        ],
        shown,
        { id: "topics" },
      ),
      el("p", { class: "note" }, `${shown.length} of ${topics.length} topics`),
    );
  };
  filter.addEventListener("input", draw);
  draw();
  root.append(section("Topics", filter, holder, source(adminPath("topicList"))));
}
