// The tab kinds the kernel sends, each made into a page by a function of (payload, ctx):
//   -> {page: the element, entry?: {view, ready, show(), stepper?}} (entry: a page with a graph)
// ctx (made by the live view) has model, data (the run), graph(kind, fields?, dot?) (a GraphView laid
// out with the run's DOT or the one given, destroyed with the view), select(i) and on(event, f) (a model listener
// removed with the view). Another kind of tab adds a function to PAGES.

import { codeSpans, h, legend } from "./dom.js";
import { FONT_PT, WHOLE_TEXT_PX } from "./graphview.js";
import { backwardPage } from "./backward.js";
import { stepsPage } from "./steps.js";
import { table } from "./tables.js";

function graphPage(payload, ctx) {
  const { data, model, panel } = ctx;
  const page = h("div", { class: "gm-page" });
  if (data.summary) {
    page.append(h("p", { class: "gm-summary" }, h("b", { text: data.summary.counts }), h("br"), ...codeSpans(data.summary.note)));
  }
  const entry = ctx.graph("graph");
  entry.view.toolbar.append(panel.picker);
  page.append(entry.view.el, legend(), panel.info);
  entry.show = () => entry.ready.then((v) => {
    if (!v.view) v.initialView(data.target, WHOLE_TEXT_PX / FONT_PT); // a small graph: whole
    ctx.select(model.get("selected"));
  });
  return { page, entry };
}

// another picture than the run's graph (a learner's own graph): its DOT (of the directions in
// `dots`, the one that fits the output best), a note above it
function picturePage(payload, ctx) {
  const page = h("div", { class: "gm-page" }, h("p", { class: "gm-summary", text: payload.note }));
  const entry = ctx.graph("picture", null, payload.dots ? ctx.choose(payload) : payload.dot);
  page.append(entry.view.el);
  entry.show = () => entry.ready.then((v) => {
    if (!v.view) v.initialView(0, WHOLE_TEXT_PX / FONT_PT); // (u0: the target)
  });
  return { page, entry };
}

function htmlPage(payload) {
  const page = h("div", { class: "gm-page" });
  page.innerHTML = payload.html; // made by gradmagic's Python with every name escaped
  return { page };
}

export const PAGES = {
  graph: graphPage,
  backward: backwardPage,
  steps: stepsPage,
  table: (payload) => ({ page: h("div", { class: "gm-page" }, table(payload)) }),
  html: htmlPage,
  picture: picturePage,
};
