// A table from the kernel ({columns, rows, classes, keys, magnitude, descending, wrap, note, head}):
// bounded, scrolling, sorted by a click on a column's header.

import { h } from "./dom.js";

// |x| of a number as written (nan and inf largest, as the largest double); a cell that is not
// one number sorts below the numbers
function size(v) {
  const x = Number(v);
  if (v !== "" && !Number.isNaN(x)) return Math.min(Math.abs(x), 1e308);
  return /^[+-]?(nan|inf|infinity)$/i.test(v) ? 1e308 : -Infinity;
}

// column c's sort key of a row: the kernel's (an array's magnitude) where it sent one, else
// the magnitude, the number or the text of what is written
function sorter(payload) {
  const numeric = payload.columns.map((_, c) => payload.rows.length > 0 &&
    payload.rows.every((r) => r[c] === "" || isFinite(Number(r[c]))));
  const magnitude = new Set(payload.magnitude || []);
  const key = (row, c) => {
    const k = payload.keys?.[row.k]?.[c];
    if (k !== null && k !== undefined) return k;
    const v = row.cells[c];
    if (magnitude.has(c)) return size(v);
    return numeric[c] ? (v === "" ? -Infinity : Number(v)) : v;
  };
  return { numeric, key };
}

export function table(payload) {
  const { numeric, key } = sorter(payload);
  const descending = new Set(payload.descending || []);
  const wrap = new Set(payload.wrap || []); // columns of words that wrap (a check's verdict)
  const cellClass = (i) => (wrap.has(i) ? "gm-wrap" : numeric[i] ? "gm-num" : null);
  const rows = payload.rows.map((cells, k) => ({ cells, k }));
  const tbody = h("tbody");
  const draw = () => tbody.replaceChildren(...rows.map((row) => {
    const cls = payload.classes?.[row.k];
    return h("tr", { class: cls ? `gm-row-${cls}` : null },
      row.cells.map((c, i) => h("td", { class: cellClass(i), text: c })));
  }));
  const headRow = h("tr");
  let sortCol = -1;
  let dir = 1;
  const sortBy = (c) => {
    dir = sortCol === c ? -dir : descending.has(c) ? -1 : 1; // a first click: the usual way
    sortCol = c;
    rows.sort((a, b) => {
      const x = key(a, c);
      const y = key(b, c);
      return x < y ? -dir : x > y ? dir : a.k - b.k;
    });
    headRow.querySelectorAll("th").forEach((t, i) => { t.dataset.sort = i === c ? (dir > 0 ? "▲" : "▼") : ""; });
    draw();
  };
  payload.columns.forEach((name, c) => headRow.append(h("th", { title: "sort", text: name, onclick: () => sortBy(c) })));
  draw();
  return h("div", { class: "gm-tablebox" },
    (payload.head || []).map((line) => h("p", { class: "gm-head", text: line })),
    h("div", { class: "gm-scroll" }, h("table", { class: "gm-table" }, h("thead", {}, headRow), tbody)),
    payload.note ? h("p", { class: "gm-note", text: payload.note }) : null);
}
