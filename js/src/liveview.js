// The live view of one run, inside the element anywidget gives it: the headline, the tab bar
// and the tabs' pages (made when first shown). destroy() removes everything it added.

import { errorText, h } from "./dom.js";
import { FONT_PT, GraphView, MAX_HEIGHT, MIN_TEXT_PX, WHOLE_TEXT_PX, screenHeight } from "./graphview.js";
import { widenFields } from "./fields.js";
import { PAGES } from "./pages.js";
import { nodePanel, tooltip } from "./panel.js";
import { layout, svgSize } from "./viz.js";

const ANSWER_WAIT_MS = 20000; // a deferred tab not made by then: no kernel answered
const AROUND_GRAPH = 170; // px of a view around its graph: headline, tabs, toolbar, legend

// children among drawn nodes -> i's path to the target (i and every node it flows into)
function pathsOf(nodes) {
  const children = new Map();
  for (const [i, n] of Object.entries(nodes)) {
    for (const p of n.parents) {
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(Number(i));
    }
  }
  return (i) => {
    const seen = new Set([i]);
    const stack = [i];
    while (stack.length) for (const c of children.get(stack.pop()) || []) if (!seen.has(c)) { seen.add(c); stack.push(c); }
    return seen;
  };
}

// A small graph comes in both directions (data.dots): the one that fits `width` x `height`
// whole with 10 px text (left to right first), else the one that fits whole with the larger
// text (at least WHOLE_TEXT_PX), else the one that shows more of itself at 10 px.
async function chooseDot(model, data, width, height) {
  if (!data.dots) return data.dot;
  const sizes = {};
  for (const d of ["LR", "TB"]) sizes[d] = svgSize(await layout(model, data.dots[d])) || { w: 1e9, h: 1e9 };
  const fit = (d) => Math.min(width / sizes[d].w, height / sizes[d].h, 4 / 3);
  const shown = (d) => Math.min(1, width / sizes[d].w) * Math.min(1, height / sizes[d].h);
  const legible = MIN_TEXT_PX / FONT_PT;
  for (const d of ["LR", "TB"]) if (fit(d) >= legible) return data.dots[d];
  const [best, other] = fit("LR") >= fit("TB") ? ["LR", "TB"] : ["TB", "LR"];
  if (fit(best) >= WHOLE_TEXT_PX / FONT_PT) return data.dots[best];
  return data.dots[shown(other) > shown(best) ? other : best];
}

// What a click on a drawn node does, by its kind ("v" a value, "o" its operation).
export const NODE_CLICKS = {
  v: (live, node) => live.pick(node.index),
  o: (live, node) => live.pick(node.index),
  // a group of a picture grouped by the code: the kernel opens it and answers in `opened.graph`
  g: (live, node) => { live.anchorAt(node.id); live.model.send({ type: "open", tab: `group:${node.id}` }); },
  // the frame of an opened group: the kernel closes it (and what was opened inside it)
  f: (live, node) => { live.anchorAt(node.id); live.model.send({ type: "close", group: node.id }); },
};

export class LiveView {
  constructor(model, el) {
    this.model = model;
    this.data = JSON.parse(model.get("data"));
    this.built = new Map(); // tab id -> {page, entry?, waiting?, timer?}
    this.graphs = [];
    this.unlisten = [];
    this.current = null;
    this.pathFrom = pathsOf(this.data.nodes);
    // data-run: the static copy published with this view hides itself beside it (its own
    // style sheet; the view never touches it)
    this.root = h("div", {
      class: "gm-root", tabindex: "0", "data-lm-suppress-shortcuts": "true", "data-run": this.data.run || null,
    });
    this.tip = tooltip(this.root, this.data.nodes);
    this.panel = nodePanel(this.data, (i) => this.pick(i), (i) => this.told(i));
    this.asked = new Map(); // node -> when its derivatives were asked of the kernel
    this.bar = h("div", { class: "gm-tabs", role: "tablist" });
    this.pages = h("div", { class: "gm-pages" });
    this.buttons = new Map(this.data.tabs.map((tab) => [tab.id, h("button", {
      class: "gm-tab", role: "tab", text: tab.title, onclick: () => this.set("tab", tab.id),
    })]));
    this.bar.append(...this.buttons.values());
    this.root.append(h("div", { class: "gm-headline", text: this.data.headline }),
      this.data.notes.map((note) => h("div", { class: "gm-warn", text: `⚠ ${note}` })),
      this.bar, this.pages, this.tip.el);
    // the view's keys are read at the window's capture phase, before the page's shortcuts:
    // Notebook 7 reads keys at the document's and takes "0" there (its "0, 0" restarts the kernel)
    this.keydown = (e) => { if (this.root.contains(e.target)) this.key(e); };
    window.addEventListener("keydown", this.keydown, true);
    // clicks inside the view give it the keyboard (not the notebook's command mode)
    this.root.addEventListener("pointerdown", (e) => {
      if (!(e.target instanceof HTMLSelectElement || e.target instanceof HTMLInputElement)) this.root.focus({ preventScroll: true });
    });
    this.on("change:selected", () => { if (this.built.has("graph")) this.select(model.get("selected")); });
    this.on("change:tab", () => this.show(model.get("tab")));
    this.on("change:opened", () => this.answered());
    el.append(this.root);
    this.sizes = new ResizeObserver(() => this.resized());
    this.sizes.observe(this.root);
    this.show(model.get("tab"));
  }

  destroy() {
    window.removeEventListener("keydown", this.keydown, true);
    this.sizes.disconnect();
    for (const [event, f] of this.unlisten) this.model.off(event, f);
    for (const made of this.built.values()) clearTimeout(made.timer);
    for (const g of this.graphs) g.view.destroy();
    this.root.remove();
  }

  on(event, f) {
    this.model.on(event, f);
    this.unlisten.push([event, f]);
  }

  set(name, value) {
    this.model.set(name, value);
    this.model.save_changes();
  }

  pick(i) { this.set("selected", i); }

  // node i selected (-1: none): the panel, and its path on the Graph tab's drawing
  select(i) {
    const nodes = this.data.nodes;
    this.panel.show(i);
    const path = i >= 0 && nodes[i] ? this.pathFrom(i) : new Set();
    for (const g of this.graphs) {
      if (g.kind !== "graph") continue;
      g.view.mark(path, i);
      g.view.reveal(i);
    }
    this.root.dataset.selected = String(i);
  }

  // Node i's derivatives ({local, incoming}): in the payload for a small run, else made by
  // the kernel when first asked and kept in `opened` (as a deferred tab is), else why not.
  told(i) {
    const n = this.data.nodes[i];
    if (n.incoming) return n;
    const made = this.openedTabs()[`node:${i}`];
    if (made) return made.incoming ? made : "Its derivatives could not be made: run the cell again.";
    const since = this.asked.get(i);
    if (since === undefined) {
      this.asked.set(i, performance.now());
      try {
        this.model.send({ type: "open", tab: `node:${i}` });
      } catch {
        this.asked.set(i, -Infinity); // no live kernel (a saved notebook reopened)
      }
      setTimeout(() => { if (this.model.get("selected") === i) this.panel.show(i); }, ANSWER_WAIT_MS);
    }
    return performance.now() - (this.asked.get(i) ?? 0) < ANSWER_WAIT_MS
      ? "Asking the kernel for its local derivatives and incoming gradient…"
      : "No kernel answered: run the cell again to see its local derivatives and incoming gradient.";
  }

  // what the page makers share (see pages.js)
  context() {
    return {
      model: this.model, data: this.data, panel: this.panel,
      graph: (kind, fields, dot) => this.graph(kind, fields, dot), select: (i) => this.select(i), on: (e, f) => this.on(e, f),
      choose: (data) => this.choose(data),
    };
  }

  // A GraphView of the run's graph (or of `source`, another picture's DOT), laid out by
  // Graphviz; `ready` resolves to the view. `fields` (index -> text): the widest text a stepped
  // tab writes in a value's grad field, which the layout makes room for (fields.js).
  graph(kind, fields = null, source = null) {
    const view = new GraphView({
      onClick: (node, e) => NODE_CLICKS[node.kind]?.(this, node, e),
      onHover: this.tip.hover,
    });
    const started = performance.now();
    if (!source) this.chosen ||= this.choose();
    const entry = { kind, view };
    const saved = kind === "graph" ? this.openedTabs().graph : null; // groups opened before
    const dot = source || (saved && saved.dot) || null;
    entry.ready = (dot ? Promise.resolve(dot) : this.chosen).then(async (chosen) => {
      const { dot, grads } = widenFields(chosen, fields);
      const svg = await layout(this.model, dot);
      view.el.dataset.layoutMs = String(Math.round(performance.now() - started));
      view.grads = grads;
      view.cellOrder = this.data.cells || null;
      view.mount(svg, dot);
      entry.dot = dot;
      return view;
    }).catch((err) => {
      this.failed(view, err);
      throw err;
    });
    this.graphs.push(entry);
    return entry;
  }

  // the direction of a small graph (the run's, or that of `data`'s dots) for the output's
  // width and the screen's height now
  choose(data = this.data) {
    this.width = this.root.clientWidth || 800;
    const room = Math.min(MAX_HEIGHT, screenHeight() - AROUND_GRAPH);
    return chooseDot(this.model, data, Math.max(200, this.width - 2), Math.max(120, room));
  }

  // The output became wider or narrower (a sidebar closed, the window resized): a small
  // graph is drawn again in the direction that now fits, from its first view.
  resized() {
    const width = this.root.clientWidth;
    if (!this.data.dots || !width || !this.width || Math.abs(width - this.width) < 40) return;
    this.chosen = this.choose();
    for (const entry of this.graphs) {
      if (entry.kind !== "graph") continue;
      entry.ready = Promise.all([entry.ready, this.chosen]).then(async ([view, dot]) => {
        if (dot === entry.dot) return view;
        view.mount(await layout(this.model, dot), dot);
        entry.dot = dot;
        view.view = null; // (a hidden page makes its first view when shown)
        if (view.port.clientWidth) {
          view.initialView(this.data.target, WHOLE_TEXT_PX / FONT_PT);
          this.select(this.model.get("selected"));
        }
        return view;
      }).catch(() => entry.view); // (a view that failed to draw has said so already)
    }
  }

  // The graph could not be drawn here: say why in a sentence. (gm-failed lets the static
  // copy show itself again: see render.static_style.)
  failed(view, err) {
    this.root.classList.add("gm-failed");
    view.port.style.height = "auto";
    view.port.replaceChildren(h("p", {
      class: "gm-warn",
      text: `The graph could not be drawn here: ${errorText(err)}. The static copy and the tables still show the run.`,
    }));
  }

  openedTabs() {
    try { return JSON.parse(this.model.get("opened") || "{}"); } catch { return {}; }
  }

  // A deferred tab (kind "deferred") is made by the kernel when first opened: its made tab
  // from `opened`, or null while it is not made yet.
  resolve(tab) {
    if (tab.kind !== "deferred") return tab;
    const made = this.openedTabs()[tab.id];
    return made ? { ...made, id: tab.id, title: tab.title } : null;
  }

  // ask the kernel for a deferred tab; a line shows meanwhile
  waiting(tab) {
    const page = h("div", { class: "gm-page gm-waiting" },
      h("p", { class: "gm-muted", text: `Making the ${tab.title} view in the kernel…` }));
    const unanswered = () => {
      if (!this.resolve(tab)) {
        page.replaceChildren(h("p", { class: "gm-warn", text: `No kernel answered: the ${tab.title} view is made by the kernel when first opened. Run the cell again to see it.` }));
      }
    };
    let timer = null;
    try {
      this.model.send({ type: "open", tab: tab.id });
      timer = setTimeout(unanswered, ANSWER_WAIT_MS);
    } catch {
      unanswered(); // no live kernel (a saved notebook reopened with its widget state)
    }
    return { page, waiting: true, timer };
  }

  make(tab) {
    const real = this.resolve(tab);
    if (!real) return this.waiting(tab);
    const page = PAGES[real.kind];
    return page ? page(real.payload, this.context()) : { page: h("p", { text: `(no view for ${real.kind})` }) };
  }

  show(id) {
    const tab = this.data.tabs.find((t) => t.id === id) || this.data.tabs[0];
    if (!tab) return;
    if (!this.built.has(tab.id)) {
      const made = this.make(tab);
      made.page.dataset.tab = tab.id;
      this.pages.append(made.page);
      this.built.set(tab.id, made);
    }
    for (const [other, made] of this.built) made.page.hidden = other !== tab.id;
    for (const [other, b] of this.buttons) b.setAttribute("aria-selected", other === tab.id ? "true" : "false");
    this.current = tab.id;
    this.root.dataset.tab = tab.id;
    const entry = this.built.get(tab.id).entry;
    if (entry) entry.show().then(() => { this.root.dataset.drawn = "1"; }).catch(() => {});
  }

  // where group `id` is on the screen (its top-left corner, in px of the viewport), so that
  // the picture drawn again with it opened (or closed) keeps it there: nothing jumps
  anchorAt(id) {
    const v = this.graphs.find((g) => g.kind === "graph")?.view;
    const g = v?.view && v.svg.querySelector(`g[data-id="${CSS.escape(id)}"]`);
    if (!g) return;
    const b = v.extent(g);
    const { s, x, y } = v.view;
    this.anchor = { id, s, x: (b.x - b.w / 2 - x) * s, y: (b.y - b.h / 2 - y) * s };
  }

  // the new picture's view: the clicked group where it was, else the target's first view
  placeAnchored(view) {
    const a = this.anchor;
    const g = a && view.svg.querySelector(`g[data-id="${CSS.escape(a.id)}"]`);
    if (!g) return view.initialView(this.data.target);
    const b = view.extent(g);
    view.view = { s: a.s, x: b.x - b.w / 2 - a.x / a.s, y: b.y - b.h / 2 - a.y / a.s };
    view.apply();
  }

  // the kernel opened a group of a picture grouped by the code: draw the new picture
  regrouped() {
    const graph = this.openedTabs().graph;
    if (!graph || !graph.dot) return;
    for (const entry of this.graphs) {
      if (entry.kind !== "graph" || entry.dot === graph.dot) continue;
      entry.dot = graph.dot;
      const view = entry.view;
      entry.ready = layout(this.model, graph.dot).then((svg) => {
        view.mount(svg, graph.dot);
        this.placeAnchored(view);
        this.select(this.model.get("selected"));
        return view;
      }).catch((err) => { this.failed(view, err); throw err; });
    }
  }

  // the kernel made deferred tabs: replace their waiting pages
  answered() {
    this.regrouped();
    const selected = this.model.get("selected");
    if (selected >= 0 && this.data.nodes[selected]) this.panel.show(selected);
    for (const [id, made] of [...this.built]) {
      const tab = made.waiting && this.data.tabs.find((t) => t.id === id);
      if (!tab || !this.resolve(tab)) continue;
      clearTimeout(made.timer);
      made.page.remove();
      this.built.delete(id);
      if (this.current === id) this.show(id);
    }
  }

  key(e) {
    if (e.target instanceof HTMLInputElement && e.target.type !== "range") return;
    if (e.target instanceof HTMLSelectElement) return;
    const entry = this.built.get(this.current)?.entry;
    const g = entry?.view;
    let handled = entry?.stepper ? entry.stepper.key(e) : false;
    if (!handled && g) {
      handled = true;
      if (e.key === "+" || e.key === "=") g.zoomBy(1.25);
      else if (e.key === "-" || e.key === "_") g.zoomBy(1 / 1.25);
      else if (e.key === "0") g.fit();
      else if (e.key === "Escape") this.pick(-1);
      else handled = false;
    }
    if (handled) { e.preventDefault(); e.stopPropagation(); }
  }
}
