// A stepped teaching tab (kind "steps": Forward, Walk, Paths): frames of {n, path, html, ev},
// each a node being processed, a path to highlight, its text and the grad-field events.

import { h, legend } from "./dom.js";
import { widest } from "./fields.js";
import { screenHeight } from "./graphview.js";
import { Stepper } from "./stepper.js";

function drawFrame(view, frames, k) {
  const f = frames[k];
  for (const i of view.nodes.keys()) view.setGrad(i, null, "");
  for (let s = 0; s <= k; s++) for (const [p, t, st] of frames[s].ev) view.setGrad(p, t, st);
  view.mark(new Set([...(f.path || []), ...(f.n >= 0 ? [f.n] : [])]), -1, "gm-path");
  view.setCurrent(f.n);
  view.reveal(f.n);
}

// The head scrolls inside a short box so that the tab fits a screen; where the tab leaves
// room on the screen (a small graph), the head takes it, up to its whole height.
function unfold(head, text, page) {
  const root = page.closest(".gm-root");
  if (!root || head.scrollHeight <= head.clientHeight) return;
  const most = parseFloat(getComputedStyle(text).maxHeight);
  const grows = most > text.offsetHeight ? most - text.offsetHeight : 0;
  const spare = screenHeight() - root.getBoundingClientRect().height - grows - 8;
  if (spare > 0) head.style.maxHeight = `${Math.min(head.scrollHeight, head.clientHeight + spare)}px`;
}

export function stepsPage(payload, ctx) {
  const frames = payload.frames || [];
  let k = 0;
  const head = h("div", { class: "gm-stephead" });
  head.innerHTML = payload.head || ""; // made by gradmagic's Python with every name escaped
  const text = h("div", { class: "gm-steptext" });
  const entry = ctx.graph("steps", widest(frames.flatMap((f) => f.ev)));
  const show = () => {
    stepper.show(k);
    if (entry.view.svg && frames[k]) drawFrame(entry.view, frames, k);
    text.innerHTML = frames[k] ? frames[k].html : ""; // escaped by gradmagic's Python
  };
  const stepper = new Stepper({
    count: frames.length,
    label: (j) => (frames.length ? `step ${j + 1} of ${payload.total}` : "no steps"),
    read: () => k,
    write: (j) => { k = j; show(); },
  });
  const page = h("div", { class: "gm-page" }, head, stepper.el,
    payload.legend ? h("p", { class: "gm-muted", text: payload.legend }) : null,
    text, entry.view.el, legend(), payload.note ? h("p", { class: "gm-note", text: payload.note }) : null);
  entry.show = () => entry.ready.then((v) => {
    if (!v.view) {
      v.initialView(ctx.data.target);
      unfold(head, text, page);
    }
    show();
  });
  entry.stepper = stepper;
  return { page, entry };
}
