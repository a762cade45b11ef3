// One stepper for every stepped tab (Backward, Forward, Walk, Paths): first / prev / next /
// last buttons, a slider and "step k of n". It holds no position of its own: `read()` gives
// the current one and `write(k)` moves it (to the widget's synced `step`, or a tab's own
// variable); whoever owns the position calls show(k) when it changes.

import { h } from "./dom.js";

export class Stepper {
  // positions 0 .. count - 1; label(k) is the text beside the slider
  constructor({ count, label, read, write }) {
    this.last = Math.max(0, count - 1);
    this.label = label;
    this.read = read;
    this.write = write;
    this.number = h("span", { class: "gm-stepno" });
    this.slider = h("input", {
      type: "range", min: "0", max: String(this.last), value: "0", class: "gm-slider", "aria-label": "step",
    });
    this.slider.addEventListener("input", () => this.stepTo(Number(this.slider.value)));
    const button = (cls, title, text, to) => h("button", { class: `gm-btn ${cls}`, title, text, onclick: () => this.stepTo(to()) });
    this.el = h("div", { class: "gm-stepper" },
      button("", "first step (Home)", "first", () => 0),
      button("gm-prev", "previous step (←)", "◀ prev", () => this.read() - 1),
      button("gm-next", "next step (→)", "next ▶", () => this.read() + 1),
      button("", "last step (End)", "last", () => this.last),
      this.slider, this.number);
  }

  // move to position k (clamped); -1 is the last
  stepTo(k) {
    this.write(Math.max(0, Math.min(this.last, k < 0 ? this.last : k)));
  }

  stepBy(d) {
    this.stepTo(Math.max(0, this.read() + d));
  }

  show(k) {
    this.slider.value = String(k);
    this.number.textContent = this.label(k);
  }

  // the keyboard: → ↓ j next, ← ↑ k previous, Home, End; true if the key was one of them
  key(e) {
    if (e.key === "ArrowRight" || e.key === "ArrowDown" || e.key === "j") this.stepBy(1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp" || e.key === "k") this.stepBy(-1);
    else if (e.key === "Home") this.stepTo(0);
    else if (e.key === "End") this.stepTo(-1);
    else return false;
    return true;
  }
}
