// Small DOM helpers. Text is always set with textContent: names come from user code.

// h("div", {class: "x", text: "hi", onclick: f}, child, ...) -> an element
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// {items, more} -> "a + b + and 3 more"
export function capped(list, sep) {
  const items = list.items.slice();
  if (list.more) items.push(`and ${list.more} more`);
  return items.join(sep);
}

// "run `x` now" -> ["run ", <code>x</code>, " now"]
export function codeSpans(text) {
  return text.split("`").map((part, k) => (k % 2 ? h("code", { text: part }) : part));
}

// An error of any kind (an Error, Graphviz's list of messages, a thrown object or string) as a
// sentence for the reader, never "[object Object]".
export function errorText(err) {
  if (err === null || err === undefined) return "an unknown error";
  if (typeof err === "string") return err;
  if (err instanceof Error) return err.message || err.name;
  if (Array.isArray(err)) return err.map(errorText).join("; ");
  if (typeof err === "object") {
    if (typeof err.message === "string") return err.message;
    if (Array.isArray(err.errors)) return errorText(err.errors);
    try { return JSON.stringify(err).slice(0, 300); } catch { /* fall through */ }
  }
  return String(err);
}

const keyItem = (cls, text) => h("span", { class: "gm-key" }, h("span", { class: `gm-swatch ${cls}` }), text);

// The colour key under a drawn graph.
export function legend() {
  const item = keyItem;
  return h("div", { class: "gm-legend" },
    item("gm-sw-leaf", "input (leaf)"), item("gm-sw-constant", "constant"), item("gm-sw-value", "value"),
    item("gm-sw-op", "operation"), item("gm-sw-target", "target"), item("gm-sw-fail", "fails the check"),
    item("gm-sw-kink", "kink"), item("gm-sw-nonfinite", "nan / inf"), item("gm-sw-path", "path to the target"));
}

// The colour key under a PyTorch run's graph: what its boxes and borders mean.
export function torchLegend() {
  const item = keyItem;
  return h("div", { class: "gm-legend" },
    item("gm-sw-leaf", "parameter (requires grad)"), item("gm-sw-constant", "data, no gradient"),
    item("gm-sw-value", "a torch call's result"), item("gm-sw-module", "module or line (click: open)"),
    item("gm-sw-fold", "repeated blocks, folded"), item("gm-sw-target", "target"),
    item("gm-sw-fail", "gradient wrong (check)"), item("gm-sw-nonfinite", "nan / inf"),
    item("gm-sw-warn", "health sign (dead, saturated, cut, update size)"));
}
