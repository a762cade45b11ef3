// A drawn graph: Graphviz's SVG in a viewport with pan (drag), zoom (buttons, ctrl + wheel),
// fit, hover and click. Nodes are found by their DOT names: "v12" (value 12), "o12" (the
// operation that made it), "h12" (a note about it); any other "<letters><digits>" name is
// reported to onClick too, so a new kind of node needs no change here. A box of a picture
// grouped by the code is named "g:<group id>" (kind "g", its id the group's).
// destroy() removes every listener the view added, on its own elements and on window.

import { h } from "./dom.js";

export const MIN_TEXT_PX = 10; // never draw text smaller than this by default
export const WHOLE_TEXT_PX = 8; // ... but a graph the Graph tab shows whole at this size or more
export const FONT_PT = 10; // the DOT's fontsize (graph units are points)
export const MAX_HEIGHT = 560; // px: the graph's viewport height at most
const MIN_HEIGHT = 140;
const MIN_ROOM = 120; // px: a short screen still gets a graph this tall

// The part of the window a notebook shows its cells in: the window less the front-end's own
// bars (menu, toolbar, status bar). Read from the window only: the view does not look into
// the page around it.
const APP_BARS = 120;
export function screenHeight() {
  return (window.innerHeight >= 300 ? window.innerHeight : 900) - APP_BARS;
}

const HINT = "drag to pan · ctrl + wheel to zoom · click a node";
const PART_HINT = "too big to fit legibly: showing part · drag to pan · ctrl + wheel to zoom";
const MAX_FIT = 4 / 3; // fitting never enlarges past this
const DRAG_PX = 4; // a press that moves less is a click

// "v12" -> {id: "v12", kind: "v", index: 12}
export function nodeKey(title) {
  const m = /^([a-z]+)(\d+)$/.exec(title.trim());
  return m ? { id: m[0], kind: m[1], index: Number(m[2]) } : null;
}

function parseSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  return document.importNode(doc.documentElement, true);
}

// a node, or the frame of an opened group (a click on its title or border closes it)
const FIELD_PAD = 6; // graph units a field's text may grow past the text Graphviz sized it for

// `text` in the SVG text `t`, shortened in its middle ("∂/∂model…[0].b ?") when it is wider
// than `room` (the field Graphviz drew for the first text), so that it never runs over the
// fields beside it; the whole text is its tooltip. (Hidden, nothing can be measured: as is.)
function fitText(t, text, room) {
  t.textContent = text;
  if (!(room > FIELD_PAD) || t.getComputedTextLength() <= room) return;
  let lo = 0;
  let hi = text.length;
  const cut = (n) => {
    const head = Math.ceil(n / 3);
    return `${text.slice(0, head)}…${text.slice(text.length - (n - head))}`;
  };
  while (lo < hi) { // the most characters that fit
    const mid = (lo + hi + 1) >> 1;
    t.textContent = cut(mid);
    if (t.getComputedTextLength() <= room) lo = mid;
    else hi = mid - 1;
  }
  t.textContent = cut(lo);
  const tip = document.createElementNS("http://www.w3.org/2000/svg", "title");
  tip.textContent = text;
  t.appendChild(tip);
}

const nodeOf = (target) => (target && target.closest ? target.closest("g.node, g.gm-frame") : null);

export class GraphView {
  // onClick({id, kind, index}, event): a node was clicked (not dragged);
  // onHover(index or null, event): the pointer is over value `index`'s record, or none
  constructor({ onClick = () => {}, onHover = () => {} } = {}) {
    this.onClick = onClick;
    this.onHover = onHover;
    this.listeners = new AbortController();
    this.el = h("div", { class: "gm-graph" });
    this.toolbar = h("div", { class: "gm-toolbar" },
      h("button", { class: "gm-btn", title: "zoom out (-)", text: "−", onclick: () => this.zoomBy(1 / 1.25) }),
      h("button", { class: "gm-btn", title: "zoom in (+)", text: "+", onclick: () => this.zoomBy(1.25) }),
      h("button", { class: "gm-btn gm-fit", title: "fit to the view (0)", text: "fit", onclick: () => this.fit() }),
      this.hint = h("span", { class: "gm-hint", text: HINT }));
    this.port = h("div", { class: "gm-port", tabindex: "-1" });
    this.el.append(this.toolbar, this.port);
    this.svg = null;
    this.nodes = new Map(); // index -> {v: g, o: g, ...} by kind
    this.edges = []; // {g, from, to}
    this.view = null; // {x, y, s}: the top-left corner in graph units, and px per unit
    this.drag = null;
    this.target = undefined; // the first view's target, and the selected node: what fit shows
    this.selected = -1;
    this.grads = null; // index -> its gradient's text, where the field was drawn wider
    this.cellOrder = null; // a grouped picture's tables: the input of each ∇ cell, in order
    this.cells = new Map(); // index -> the SVG text of its ∇ cell in a table of inputs
    this._listen();
  }

  destroy() {
    this.listeners.abort();
    this.drag?.moves.abort();
    this.drag = null;
    this.el.remove();
  }

  mount(svgText, dot = "") {
    const svg = parseSvg(svgText);
    this.lr = !/rankdir=TB/.test(dot);
    this.gw = svg.viewBox.baseVal.width;
    this.gh = svg.viewBox.baseVal.height;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("class", "gm-svg");
    this.nodes = new Map(); // (mounted again: a group opened)
    this.edges = [];
    svg.querySelectorAll("title").forEach((t) => {
      this._index(t.parentNode, t.textContent || "");
      t.remove(); // no "v12" browser tooltips
    });
    // Graphviz wraps nodes with tooltips in <a xlink:title>: drop those titles too
    svg.querySelectorAll("a").forEach((a) => a.removeAttribute("xlink:title"));
    this.svg = svg;
    this.root = svg.querySelector("g.graph");
    this.port.replaceChildren(svg);
    this._cells();
  }

  // the ∇ cells of a grouped picture's tables, found in the order the kernel drew them
  _cells() {
    this.cells = new Map();
    if (!this.cellOrder) return;
    const texts = [...this.svg.querySelectorAll("g.node text")].filter((t) => t.textContent.startsWith("∇"));
    if (texts.length !== this.cellOrder.length) return; // (not the tables it was told of)
    this.cellOrder.forEach((i, k) => this.cells.set(i, texts[k]));
  }

  // every node whose gradient is drawn: its record's grad field or its table cell
  gradIndices() {
    return [...this.nodes.keys(), ...[...this.cells.keys()].filter((i) => !this.nodes.has(i))];
  }

  _index(g, title) {
    const k = nodeKey(title);
    const group = /^g:(.+)$/.exec(title.trim()); // a box of a picture grouped by the code
    const frame = /^cluster_(.+)$/.exec(title.trim()); // a group opened: its dashed frame
    if (g.classList.contains("cluster") && frame) {
      g.dataset.kind = "f";
      g.dataset.id = frame[1];
      g.classList.add("gm-frame");
    } else if (g.classList.contains("node") && group) {
      g.dataset.kind = "g";
      g.dataset.id = group[1];
      g.classList.add("gm-group");
    } else if (g.classList.contains("node") && k) {
      g.dataset.kind = k.kind;
      g.dataset.index = k.index;
      g.dataset.id = k.id;
      if (!this.nodes.has(k.index)) this.nodes.set(k.index, {});
      this.nodes.get(k.index)[k.kind] = g;
    } else if (g.classList.contains("edge")) {
      const [a, b] = title.split("->").map(nodeKey);
      if (a && b) this.edges.push({ g, from: a, to: b });
    }
  }

  get width() { return this.port.clientWidth || this.w0; }
  get height() { return this.port.clientHeight || this.h0; }

  // The first view: fitted, but text never under MIN_TEXT_PX (or `whole`, a scale, for a graph
  // that fits whole at that size: the Graph tab's small graphs); a graph too big for that shows
  // the part around `target`, the target at the far end of the flow (right for LR, bottom
  // for TB) and what feeds it before it (a grouped picture: the groups and tables nearest
  // the target).
  initialView(target, whole = MIN_TEXT_PX / FONT_PT) {
    if (!this.svg) return;
    this.target = target;
    const w = Math.max(200, this.port.clientWidth || 800);
    const most = this.room();
    const s0 = Math.min(w / this.gw, (most - 8) / this.gh, MAX_FIT);
    // (a graph that fits whole with text of `whole` scale or more opens whole)
    const least = s0 >= whole ? Math.min(MIN_TEXT_PX / FONT_PT, s0) : MIN_TEXT_PX / FONT_PT;
    const tall = (s) => Math.min(most, Math.max(MIN_HEIGHT, this.gh * s + 8));
    let s = Math.min(w / this.gw, MAX_FIT);
    let height = tall(s);
    s = Math.min(s, (height - 8) / this.gh);
    if (s < least) {
      s = least;
      height = tall(s);
    }
    this.port.style.height = `${Math.round(height)}px`;
    this.w0 = w;
    this.h0 = height;
    const fits = this.gw * s <= w + 1 && this.gh * s <= height + 1;
    const b = fits || target === undefined ? null : this.box(target);
    if (!b) {
      this.view = fits || target === undefined
        ? { s, x: (this.gw - w / s) / 2, y: (this.gh - height / s) / 2 }
        : { s, x: 0, y: 0 };
    } else {
      this.view = {
        s,
        x: this.lr ? b.x + b.w / 2 + 16 - w / s : b.x - w / 2 / s,
        y: this.lr ? b.y - height / 2 / s : b.y + b.h / 2 + 16 - height / s,
      };
      this.clamp();
      this.uncut(w, height);
    }
    this.apply();
  }

  // A first view that ends at the target cuts the boxes at its far edge (left for LR, top
  // for TB) in half: it starts instead past them, in the gap before the next column (row),
  // moving at most half the window (a blank margin past the target, rather than half a box).
  uncut(w, height) {
    const { s } = this.view;
    const [axis, across, span, room, side] = this.lr ? ["x", "y", "w", w / s, "h"] : ["y", "x", "h", height / s, "w"];
    const seen = [this.view[across], this.view[across] + (this.lr ? height : w) / s];
    const boxes = [...this.svg.querySelectorAll("g.node")].map((g) => this.extent(g)).filter((e) =>
      e[across] + e[side] / 2 > seen[0] && e[across] - e[side] / 2 < seen[1]);
    let at = this.view[axis];
    for (let k = 0; k < 6; k++) {
      const cut = boxes.filter((e) => e[axis] - e[span] / 2 < at - 1 && e[axis] + e[span] / 2 > at + 1);
      if (!cut.length) break;
      at = Math.max(...cut.map((e) => e[axis] + e[span] / 2)) + 6 / s;
    }
    if (at - this.view[axis] <= room / 2) this.view[axis] = at;
  }

  // The viewport's height at most: MAX_HEIGHT, less where the screen is shorter than the
  // whole view would be (a stepped tab's texts above the graph, a short window), so that the
  // view, from its headline to its legend, fits on the screen that scrolls it.
  room() {
    const root = this.el.closest(".gm-root");
    if (!root || !this.el.isConnected) return MAX_HEIGHT;
    let around = root.getBoundingClientRect().height - this.port.getBoundingClientRect().height;
    // a stepped tab's text changes at every step: room for it at its tallest
    for (const t of this.el.closest(".gm-page")?.querySelectorAll(".gm-steptext") || []) {
      const most = parseFloat(getComputedStyle(t).maxHeight);
      if (most > t.offsetHeight) around += most - t.offsetHeight;
    }
    return Math.round(Math.max(MIN_ROOM, Math.min(MAX_HEIGHT, screenHeight() - around - 8)));
  }

  // graph-unit centre and size of node `index`'s record (or its operation's, or its box)
  box(index) {
    const kinds = this.nodes.get(index);
    const g = kinds && (kinds.v || kinds.o || Object.values(kinds)[0]);
    return g && this.root ? this.extent(g) : null;
  }

  // graph-unit centre and size of the drawn element `g`
  extent(g) {
    const b = g.getBBox();
    const m = this.root.transform.baseVal.consolidate()?.matrix;
    const cx = b.x + b.width / 2;
    const cy = b.y + b.height / 2;
    const p = m ? { x: m.a * cx + m.c * cy + m.e, y: m.b * cx + m.d * cy + m.f } : { x: cx, y: cy };
    return { ...p, w: b.width, h: b.height };
  }

  // The whole graph, when its text stays WHOLE_TEXT_PX or more; else the largest part that
  // keeps it so, centred on the selected node (else the target), and the hint says so.
  fit() {
    if (!this.svg) return;
    const { width: w, height: hgt } = this;
    const whole = Math.min(w / this.gw, hgt / this.gh, MAX_FIT);
    const legible = WHOLE_TEXT_PX / FONT_PT;
    const s = Math.max(whole, legible);
    const at = whole < legible && this.box(this.selected >= 0 ? this.selected : this.target);
    const c = at || { x: this.gw / 2, y: this.gh / 2 };
    this.view = { s, x: c.x - w / 2 / s, y: c.y - hgt / 2 / s };
    if (whole < legible) this.clamp();
    this.apply();
    this.hint.textContent = whole < legible ? PART_HINT : HINT;
  }

  apply() {
    const { width: w, height: hgt } = this;
    const { s, x, y } = this.view;
    this.svg.setAttribute("width", w);
    this.svg.setAttribute("height", hgt);
    this.svg.setAttribute("viewBox", `${x} ${y} ${w / s} ${hgt / s}`);
    this.el.dataset.scale = s.toFixed(4);
  }

  // zoom by `f` about the point (cx, cy) of the viewport (its centre by default)
  zoomBy(f, cx, cy) {
    if (!this.view) return;
    const px = cx === undefined ? this.width / 2 : cx;
    const py = cy === undefined ? this.height / 2 : cy;
    const { s, x, y } = this.view;
    const fitScale = Math.min(this.width / this.gw, MAX_HEIGHT / this.gh, MAX_FIT);
    const least = Math.min(fitScale, MIN_TEXT_PX / FONT_PT) / 2;
    const ns = Math.max(least, Math.min(8, s * f));
    this.view = { s: ns, x: x + px / s - px / ns, y: y + py / s - py / ns };
    this.apply();
  }

  centreOn(index) {
    const p = this.box(index);
    if (!p || !this.view) return;
    const { s } = this.view;
    this.view = { s, x: p.x - this.width / 2 / s, y: p.y - this.height / 2 / s };
    this.clamp();
    this.apply();
  }

  // keep the drawing in the viewport where it is bigger than it (no empty margins)
  clamp() {
    const { s } = this.view;
    const fit = (v, span, size) => (span > size ? Math.max(0, Math.min(v, span - size)) : (span - size) / 2);
    this.view.x = fit(this.view.x, this.gw, this.width / s);
    this.view.y = fit(this.view.y, this.gh, this.height / s);
  }

  visible(index) {
    const p = this.box(index);
    if (!p || !this.view) return false;
    const { s, x, y } = this.view;
    const sx = (p.x - x) * s;
    const sy = (p.y - y) * s;
    return sx > 20 && sy > 10 && sx < this.width - 20 && sy < this.height - 10;
  }

  // centre node `index` if it is out of view
  reveal(index) {
    if (index >= 0 && this.svg && !this.visible(index)) this.centreOn(index);
  }

  _listen() {
    const { signal } = this.listeners;
    const on = (target, type, f, options = {}) => target.addEventListener(type, f, { ...options, signal });
    on(this.port, "pointerdown", (e) => this._press(e));
    on(this.port, "wheel", (e) => {
      if (!(e.ctrlKey || e.metaKey) || !this.view) return; // a plain wheel scrolls the page
      e.preventDefault();
      const r = this.port.getBoundingClientRect();
      this.zoomBy(Math.exp(-e.deltaY / 300), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    on(this.port, "mousemove", (e) => {
      const g = nodeOf(e.target);
      this.onHover(g && g.dataset.kind === "v" ? Number(g.dataset.index) : null, e);
    });
    on(this.port, "mouseleave", (e) => this.onHover(null, e));
  }

  // A press starts a drag; window listens only while the button is down (a drag may leave
  // the view), and a press released without moving is a click on the node under it.
  _press(e) {
    if (e.button !== 0 || !this.view) return;
    this.drag?.moves.abort();
    const moves = new AbortController();
    const { signal } = moves;
    this.drag = { x: e.clientX, y: e.clientY, vx: this.view.x, vy: this.view.y, moved: false, moves };
    window.addEventListener("pointermove", (m) => this._move(m), { signal });
    window.addEventListener("pointerup", (u) => this._release(u), { signal });
    window.addEventListener("pointercancel", () => this._release(null), { signal });
  }

  _move(e) {
    const d = this.drag;
    if (!d) return;
    const dx = e.clientX - d.x;
    const dy = e.clientY - d.y;
    if (!d.moved && Math.abs(dx) + Math.abs(dy) < DRAG_PX) return;
    d.moved = true;
    this.port.classList.add("gm-dragging");
    this.view = { ...this.view, x: d.vx - dx / this.view.s, y: d.vy - dy / this.view.s };
    this.apply();
  }

  _release(e) {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    d.moves.abort();
    this.port.classList.remove("gm-dragging");
    const g = e && !d.moved ? nodeOf(e.target) : null;
    if (g && this.port.contains(g) && g.dataset.id) {
      this.onClick({ id: g.dataset.id, kind: g.dataset.kind, index: Number(g.dataset.index) }, e);
    }
  }

  // classes on nodes/edges: the path highlight and the selected node
  mark(path, selected, cls = "gm-path") {
    this.selected = selected;
    for (const [i, g] of this.nodes) {
      const on = path.has(i);
      if (g.v) g.v.classList.toggle(cls, on);
      if (g.o) g.o.classList.toggle(cls, on && i !== selected);
      if (g.v) g.v.classList.toggle("gm-selected", i === selected);
    }
    for (const e of this.edges) {
      const on = e.from.kind === "o"
        ? path.has(e.to.index) && e.to.index !== selected // an operation -> its value
        : path.has(e.from.index) && path.has(e.to.index);
      e.g.classList.toggle(cls, on);
    }
  }

  // the node being processed: value `index` (and its operation when `withOp`)
  setCurrent(index, withOp = false) {
    for (const [i, g] of this.nodes) {
      if (g.v) g.v.classList.toggle("gm-current", i === index);
      if (g.o) g.o.classList.toggle("gm-current", withOp && i === index);
    }
  }

  // the grad field of value `index` (the record's last text): `text`, or the drawn one
  // when null; `state` "p" (a partial sum) or "u" (not yet known) colours it
  setGrad(index, text, state) {
    const g = this.nodes.get(index)?.v;
    if (!g) return this.setCell(index, text, state);
    const texts = g.querySelectorAll("text");
    const last = texts[texts.length - 1];
    if (!last) return;
    if (last.dataset.drawn === undefined) last.dataset.drawn = last.textContent;
    // (a field drawn wider than its gradient, for a stepped tab's texts: see fields.js)
    if (last.dataset.orig === undefined) last.dataset.orig = this.grads?.get(index) ?? last.textContent;
    if (!last.dataset.room) { // the width of the text the field was drawn for, once shown
      last.textContent = last.dataset.drawn;
      const w = last.getComputedTextLength();
      if (w > 0) last.dataset.room = String(w + FIELD_PAD);
    }
    fitText(last, text === null ? last.dataset.orig : text, Number(last.dataset.room));
    g.classList.toggle("gm-partial", state === "p");
    g.classList.toggle("gm-unknown", state === "u");
  }

  // an input's ∇ cell in a table: as setGrad writes a record's field ("grad 0.5 so far"
  // as "∇0.5", in the partial sum's colour)
  setCell(index, text, state) {
    const t = this.cells.get(index);
    if (!t) return;
    if (t.dataset.orig === undefined) t.dataset.orig = t.textContent;
    if (!t.dataset.room) {
      const w = t.getComputedTextLength();
      if (w > 0) t.dataset.room = String(w + FIELD_PAD);
    }
    const figure = text === null ? null : text.replace(/^grad /, "").replace(/ so far$/, "");
    fitText(t, figure === null ? t.dataset.orig : `∇${figure}`, Number(t.dataset.room));
    t.classList.toggle("gm-partial", state === "p");
    t.classList.toggle("gm-unknown", state === "u");
  }
}
