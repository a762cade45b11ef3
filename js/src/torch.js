// A recorded PyTorch run in the live view (gradmagic.views.torchview.payload): the same
// LiveView, with three additions registered by widget.js.
//   torchgraph     the Graph tab, plus what the selected box's value is (its whole numbers on
//                  demand, asked of the kernel) and a way back from opened modules
//   torchbackward  the backward pass as torch's autograd nodes ran it, one node a step,
//                  its box lit on the graph
//   m (a click)    a module's box, or a folded "Block x N", opened one level by the kernel
// The kernel answers a "layout" message with a new `data` (the view draws itself again) and
// a "tensor" message with a custom message.

import { h, torchLegend } from "./dom.js";
import { PAGES } from "./pages.js";
import { Stepper } from "./stepper.js";

// classes on every drawn box (of any kind) by box number
function light(view, boxes, cls) {
  for (const [i, kinds] of view.nodes) {
    for (const g of Object.values(kinds)) g.classList.toggle(cls, boxes.has(i));
  }
}

function openModules(model, data, extra) {
  const open = extra === null ? [] : [...(data.open || []), extra];
  model.send({ type: "layout", open });
}

function graphPage(payload, ctx) {
  const { model, data } = ctx;
  const made = PAGES.graph(payload, ctx);
  // (the shared key speaks of scalar graphs: this graph's boxes are torch calls and modules)
  const key = made.page.querySelector(".gm-legend");
  if (key) key.replaceWith(torchLegend());
  const whole = h("pre", { class: "gm-full gm-torch-tensor", hidden: true });
  const ask = h("button", { class: "gm-btn gm-torch-whole", text: "show the whole tensor" });
  const status = h("span", { class: "gm-muted" });
  const actions = h("div", { class: "gm-torch-actions" }, ask, status);
  if (data.open && data.open.length) {
    actions.append(h("button", {
      class: "gm-btn gm-torch-close", text: "close the opened modules",
      onclick: () => openModules(model, data, null),
    }));
  }
  const update = () => {
    const node = data.nodes[model.get("selected")];
    ask.hidden = !node || node.value < 0;
    ask.disabled = !!node && !node.kept;
    ask.title = node && !node.kept ? "too big to be kept whole: the statistics are above" : "";
    whole.hidden = true;
    status.textContent = "";
  };
  ask.addEventListener("click", () => {
    const node = data.nodes[model.get("selected")];
    if (!node) return;
    status.textContent = "asking the kernel…";
    try {
      model.send({ type: "tensor", value: node.value });
    } catch {
      status.textContent = "no kernel: run the cell again to see the whole tensor";
    }
  });
  ctx.on("msg:custom", (msg) => {
    if (!msg || (msg.type !== "tensor" && msg.type !== "error")) return;
    const node = data.nodes[model.get("selected")];
    if (msg.type === "tensor" && (!node || node.value !== msg.value)) return;
    status.textContent = "";
    whole.hidden = false;
    whole.textContent = msg.error
      ? msg.error
      : `${msg.name} (${msg.size} numbers)\n${msg.data}` + (msg.grad ? `\n\ngradient\n${msg.grad}` : "\n\nno gradient");
  });
  ctx.on("change:selected", update);
  update();
  made.page.append(actions, whole);
  // A picture too big for the output opens at the target; drawn again with a module opened
  // by a click, it opens where that module is instead, and a picture with repeated blocks
  // folded where the fold is (what a click opens), when they are out of view there.
  const opened = data.open && data.open.length ? data.open[data.open.length - 1] : "";
  const focus = Object.keys(data.nodes).find((i) => (opened
    ? (data.nodes[i].name || "").includes(opened)
    : data.nodes[i].op === "fold"));
  if (focus !== undefined) {
    const show = made.entry.show;
    made.entry.show = () => made.entry.ready.then((v) => {
      const first = !v.view;
      return show().then(() => { if (first) v.reveal(Number(focus)); });
    });
  }
  return made;
}

function stepText(k, payload, data) {
  if (k === 0) {
    const t = data.nodes[data.target];
    return [h("p", { text: `Start: ${t ? t.name : "the target"} gets the seed gradient 1. Step through the ${payload.total} autograd nodes in the order backward ran them.` })];
  }
  const [node, box, op, value, grad] = payload.steps[k - 1];
  const b = data.nodes[box];
  const where = b ? ` (its box: ${b.name})` : "";
  const what = node === "AccumulateGrad"
    ? `adds the gradient into ${value || "a leaf"}`
    : `is the backward of ${op || "an op not recorded"}${value ? `, which made ${value}` : ""}`;
  return [h("p", {}, `Node ${k} of ${payload.total}: `, h("code", { text: node }), ` ${what}${where}.`),
    grad ? h("p", {}, "The gradient it received: ", h("code", { text: grad })) : null].filter(Boolean);
}

function backwardPage(payload, ctx) {
  const { model, data } = ctx;
  const steps = payload.steps;
  const last = steps.length;
  const stepper = new Stepper({
    count: last + 1,
    label: (k) => `node ${k} of ${payload.total}`,
    read: () => model.get("step"),
    write: (k) => { model.set("step", k); model.save_changes(); },
  });
  const text = h("div", { class: "gm-steptext" });
  const entry = ctx.graph("backward");
  const page = h("div", { class: "gm-page" }, stepper.el,
    h("p", { class: "gm-muted", text: "← / → step (click the view first) · green: the box of the node running, blue: boxes backward has passed through." }),
    text, entry.view.el, payload.note ? h("p", { class: "gm-note", text: payload.note }) : null);
  const show = () => {
    const k = Math.min(last, Math.max(0, model.get("step")));
    stepper.show(k);
    if (entry.view.svg) {
      const box = k ? steps[k - 1][1] : data.target;
      light(entry.view, new Set(steps.slice(0, k).map((s) => s[1])), "gm-t-done");
      light(entry.view, new Set([box]), "gm-t-current");
      if (box >= 0) entry.view.reveal(box);
    }
    text.replaceChildren(...stepText(k, payload, data));
  };
  entry.show = () => entry.ready.then((v) => { if (!v.view) v.initialView(data.target); show(); });
  entry.stepper = stepper;
  ctx.on("change:step", () => { if (entry.view.svg) show(); });
  return { page, entry };
}

export const TORCH_PAGES = { torchgraph: graphPage, torchbackward: backwardPage };

export const TORCH_CLICKS = {
  m: (live, node) => {
    const box = live.data.nodes[node.index];
    if (!box || !box.opens) return;
    live.root.dataset.opening = box.opens;
    try {
      openModules(live.model, live.data, box.opens);
    } catch {
      live.root.dataset.opening = "";
    }
  },
};
