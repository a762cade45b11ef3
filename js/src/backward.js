// The Backward tab: the backward pass step by step, from the target back to the leaves, with
// each input's running sum and the graph's grad fields filling in. Its position is the
// widget's synced `step` (0: the seed, k: after the k-th operation node).

import { h, legend } from "./dom.js";
import { widest } from "./fields.js";
import { Stepper } from "./stepper.js";

const code = (t) => h("code", { text: t });

function startText(payload, data) {
  const t = data.nodes[data.target];
  const n = payload.total;
  return [h("p", {}, "Start: the target ", code(t ? t.name : "target"), " gets the seed gradient ",
    code(t ? t.gradFull : "1"), `. Step through the ${n} operation node${n === 1 ? "" : "s"} one at a time, from the target back to the leaves.`)];
}

export function stepText(k, payload, data) {
  if (k === 0) return startText(payload, data);
  const s = payload.steps[k - 1];
  const rule = s.rule ? h("p", { class: "gm-rule", text: s.rule }) : null;
  const p = h("p", {}, `Step ${k} of ${payload.total}: `, code(s.name), ` (${s.op}) has its final gradient `, code(s.grad));
  if (s.tensor) {
    p.append(` and passes it to ${s.inputs.join(", ")} through the op's vector-Jacobian product.`);
    return [p, rule].filter(Boolean);
  }
  p.append(" and passes it to its inputs:");
  const list = h("ul", { class: "gm-terms" }, s.items.map(([name, g, local, prod, sofar, fin]) =>
    h("li", {}, code(name), ` += ${g} × ${local} = ${prod}  →  `, code(name), fin ? ` = ${sofar} (final)` : ` so far ${sofar}`)));
  if (s.more) list.append(h("li", { text: `and ${s.more} more` }));
  return [p, list, rule].filter(Boolean);
}

// the graph after k steps: every grad field unknown, then the steps' events replayed
function drawStep(view, k, payload, data) {
  const nodes = data.nodes;
  for (const i of view.gradIndices()) {
    if (nodes[i]) view.setGrad(i, i === data.target ? null : "grad ?", i === data.target ? "f" : "u");
  }
  for (let s = 0; s < k; s++) {
    for (const [p, fig, st] of payload.steps[s].ev) view.setGrad(p, st === "f" ? null : `grad ${fig} so far`, st);
  }
  const cur = k ? payload.steps[k - 1].n : data.target;
  view.mark(new Set(k ? [cur, ...(nodes[cur]?.parents || [])] : [cur]), -1, "gm-path");
  view.setCurrent(cur, k > 0);
  view.reveal(cur);
}

export function backwardPage(payload, ctx) {
  const { model, data } = ctx;
  const last = payload.steps.length;
  const stepper = new Stepper({
    count: last + 1,
    label: (k) => `step ${k} of ${payload.total}`,
    read: () => model.get("step"),
    write: (k) => { model.set("step", k); model.save_changes(); },
  });
  const text = h("div", { class: "gm-steptext" });
  const written = payload.steps.flatMap((s) => s.ev.filter(([, , st]) => st !== "f").map(([p, fig]) => [p, `grad ${fig} so far`]));
  const entry = ctx.graph("backward", widest(written));
  const page = h("div", { class: "gm-page" }, stepper.el,
    h("p", { class: "gm-muted", text: "← / → step (click the view first) · grad fields fill in as backward runs: ? not yet known, yellow partial sum, green the node being processed." }),
    text, entry.view.el, legend(), payload.note ? h("p", { class: "gm-note", text: payload.note }) : null);
  const show = () => {
    const k = Math.min(last, Math.max(0, model.get("step")));
    stepper.show(k);
    if (entry.view.svg) drawStep(entry.view, k, payload, data);
    text.replaceChildren(...stepText(k, payload, data));
  };
  entry.show = () => entry.ready.then((v) => { if (!v.view) v.initialView(data.target); show(); });
  entry.stepper = stepper;
  ctx.on("change:step", () => { if (entry.view.svg) show(); });
  return { page, entry };
}
