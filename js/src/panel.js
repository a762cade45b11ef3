// What the Graph tab shows about one node: the picker (every drawn node by name), the side
// panel of the selected node, and the hover box with a value's whole data and gradient.

import { capped, h } from "./dom.js";

const warning = (f) => h("div", { class: "gm-warn", text: `⚠ ${f}` });

// `told`: the node's rule, local derivatives and incoming gradient ({rule, local, incoming}: a big run's
// come from the kernel when the node is first selected), or a line saying why they are not here
function describe(n, i, isTarget, told) {
  const row = (k, v) => h("div", { class: "gm-row" }, h("span", { class: "gm-k", text: k }), h("span", { class: "gm-v", text: v }));
  const value = (k, full) => (full.includes("\n") || full.length > 60
    ? [h("div", { class: "gm-k", text: k }), h("pre", { class: "gm-full", text: full })]
    : [row(k, full)]);
  const known = typeof told === "object";
  const incoming = known ? capped(told.incoming, " + ") : "";
  const sum = known && (told.incoming.items.length > 1 || told.incoming.more) ? ` = ${n.gradFull.length < 40 ? n.gradFull : n.grad}` : "";
  return [
    h("div", { class: "gm-info-name", text: `${n.name}${n.shape ? "  " + n.shape : ""}   #${i}   ${n.op ? "made by " + n.op : "a leaf"}` }),
    ...value("data", n.dataFull),
    ...value("grad", n.gradFull),
    n.leaf || !known ? null : row("local derivatives", capped(told.local, "; ")),
    known && told.rule ? row("rule", told.rule) : null,
    known ? row(isTarget ? "gradient" : "incoming gradient", incoming + sum) : h("p", { class: "gm-muted", text: told }),
    ...n.flags.map(warning),
  ].filter(Boolean);
}

// The picker and the side panel; pick(i) is called with the node chosen in the list, told(i)
// gives what describe() shows of node i's derivatives.
export function nodePanel(data, pick, told) {
  const nodes = data.nodes;
  const picker = h("select", { class: "gm-picker", "aria-label": "node" },
    h("option", { value: "-1", text: "(pick a node, or click one in the graph)" }),
    data.order.map((i) => h("option", {
      value: String(i), text: `${nodes[i].name}${nodes[i].shape ? " " + nodes[i].shape : ""}  [${nodes[i].op || "leaf"}, #${i}]`,
    })));
  picker.addEventListener("change", () => pick(Number(picker.value)));
  const info = h("div", { class: "gm-info" });
  const show = (i) => {
    picker.value = String(nodes[i] ? i : -1);
    info.replaceChildren(...(i >= 0 && nodes[i]
      ? describe(nodes[i], i, i === data.target, told(i))
      : [h("p", { class: "gm-muted", text: "Click a node to see its local derivatives and the gradient flowing into it; hover one for its full value." })]));
  };
  show(-1);
  return { picker, info, show };
}

// The hover box, placed in `root` near the pointer: hover(i, event), or hover(null) to hide.
export function tooltip(root, nodes) {
  const el = h("div", { class: "gm-tooltip", hidden: true });
  const hover = (i, e) => {
    const n = i === null ? null : nodes[i];
    if (!n) { el.hidden = true; return; }
    el.replaceChildren(
      h("div", { class: "gm-tip-name", text: `${n.name}${n.shape ? "  " + n.shape : ""}${n.op ? "  (" + n.op + ")" : ""}` }),
      h("div", { class: "gm-tip-k", text: "data" }), h("pre", { text: n.dataFull }),
      h("div", { class: "gm-tip-k", text: "grad" }), h("pre", { text: n.gradFull }),
      ...n.flags.map(warning));
    el.hidden = false;
    const r = root.getBoundingClientRect();
    el.style.left = `${Math.min(e.clientX - r.left + 14, Math.max(0, r.width - 340))}px`;
    el.style.top = `${e.clientY - r.top + 14}px`;
  };
  return { el, hover };
}
