import marimo

app = marimo.App()


@app.cell
def _():
    import math

    import marimo as mo

    import gradmagic

    return gradmagic, math, mo


@app.cell
def _(mo):
    mo.md(
        """
        # gradmagic in marimo

        marimo has no `%%autograd` magic, so the run comes from `gradmagic.autograd`: it takes a
        function, runs it with its inputs as `%%autograd` runs a cell, and returns the run. Its
        view is an anywidget: click a node to see its path to the target.
        """
    )
    return


@app.cell
def _(mo):
    w_slider = mo.ui.slider(-2.0, 2.0, step=0.1, value=0.5, label="w")
    w_slider
    return (w_slider,)


@app.cell
def _(math):
    def loss(w, b):
        y = math.tanh(w * 2.0 + b)
        return (y - 0.5) ** 2

    return (loss,)


@app.cell
def _(gradmagic, loss, w_slider):
    run = gradmagic.autograd(loss)(w_slider.value, b=-1.0)
    return (run,)


@app.cell
def _(mo, run):
    mo.ui.anywidget(run.view())
    return


@app.cell
def _(mo, run):
    report = run.check()
    mo.md(
        f"loss = {run.value:.6g}, ∂loss/∂w = {run.grads['w']:.6g}, "
        f"∂loss/∂b = {run.grads['b']:.6g}; check: {report.verdict}"
    )
    return


if __name__ == "__main__":
    app.run()
