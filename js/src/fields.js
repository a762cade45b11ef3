// The grad fields a stepped tab writes in ("not visited", "grad 4 so far", "∂/∂a 6"), sized
// by Graphviz: the tab lays the run's DOT out with each value's last field holding the
// widest text the tab will write there (up to WIDEST characters), so that the texts fit
// rather than being shortened. Only the record-shaped values of a plain drawing are widened;
// a picture grouped by the code is left as it is.

export const WIDEST = 28; // characters: a longer text is shortened in its field (see graphview.js)

const RECORD = /^(\s*v(\d+) \[shape="record", label=")((?:[^"\\]|\\.)*)"/gm;

// a record field's text as drawn, and a text as a record field inside a quoted DOT string
const unescape = (field) => field.replace(/\\(.)/g, "$1");
const escape = (text) => text.replace(/[\\{}|<>"]/g, (c) => `\\${c}`).replace(/\s/g, " ");

// index -> the widest of the texts [index, text] (widest by characters)
export function widest(pairs) {
  const out = new Map();
  for (const [i, text] of pairs) {
    if (typeof text !== "string") continue;
    const t = text.length > WIDEST ? text.slice(0, WIDEST) : text;
    if (!out.has(i) || out.get(i).length < t.length) out.set(i, t);
  }
  return out;
}

// {dot, grads}: `dot` with the last field of value i holding texts.get(i) where that is
// longer than what it holds, and grads: i -> the text it held (what the field shows when the
// tab writes nothing there)
export function widenFields(dot, texts) {
  const grads = new Map();
  if (!texts || !texts.size) return { dot, grads };
  const out = dot.replace(RECORD, (whole, head, index, label) => {
    const text = texts.get(Number(index));
    if (text === undefined) return whole;
    let bar = -1; // the last field starts after the last unescaped "|"
    for (let k = 0; k < label.length; k++) {
      if (label[k] === "\\") k++;
      else if (label[k] === "|") bar = k;
    }
    if (bar < 0) return whole;
    const closed = label.endsWith("}") && !label.endsWith("\\}") ? "}" : "";
    const field = unescape(label.slice(bar + 1, label.length - closed.length));
    if (field.length >= text.length) return whole;
    grads.set(Number(index), field);
    return `${head}${label.slice(0, bar + 1)}${escape(text)}${closed}"`;
  });
  return { dot: out, grads };
}
