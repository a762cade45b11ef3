// The %%autograd live view: an anywidget ESM module.
//
// The kernel sends `data` (gradmagic.views.tabs.payload): the DOT text of the graph, the drawn
// nodes' short and full values and explanations, the tabs (each {id, title, kind, payload})
// and the backward steps. Graphviz (WebAssembly, from the shared VizLibrary model) lays the
// graph out here; selecting, hovering, panning, zooming and stepping never go back to the
// kernel. Tabs of kind "deferred" (Backward and the teaching views of a bigger run) are made
// by the kernel when first opened: the view asks with a custom message and the tab arrives in
// `opened`. The view stays inside `el`; render returns the cleanup anywidget calls when the
// view is removed.
//
//   viz.js        Graphviz: loading it, laying DOT out
//   graphview.js  a drawn graph: pan, zoom, fit, hover, click
//   liveview.js   the tab bar, deferred tabs, the keyboard
//   pages.js      tab kind -> page (graph, table, html; backward.js, steps.js)
//   stepper.js    the stepper of the stepped tabs
//   panel.js      the node picker, side panel and hover box
//   tables.js     sortable tables
//   torch.js      a PyTorch run: its Graph and Backward pages, a module opened by a click
//
// A new `data` (the kernel drew the run again: a module opened) makes the view anew.

import { LiveView, NODE_CLICKS } from "./liveview.js";
import { PAGES } from "./pages.js";
import { TORCH_CLICKS, TORCH_PAGES } from "./torch.js";
import { viz } from "./viz.js";

Object.assign(PAGES, TORCH_PAGES);
Object.assign(NODE_CLICKS, TORCH_CLICKS);

function render({ model, el }) {
  viz(model).catch(() => {}); // (loaded while the view is built: its first layout waits less)
  let view = new LiveView(model, el);
  const again = () => {
    view.destroy();
    view = new LiveView(model, el);
  };
  model.on("change:data", again);
  return () => {
    model.off("change:data", again);
    view.destroy();
  };
}

export default { render };
