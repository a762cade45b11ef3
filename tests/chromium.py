"""What the browser tests share: Debian's Chromium started headless, and a server stopped."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# headless, and quiet on a machine with no network (Chromium's background connections are
# refused there, many at a time)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# the drawn boxes a page's graph viewport shows cut at its left edge (evaluated on a .gm-page)
CUT_AT_LEFT = """page => {
  const port = page.querySelector('.gm-port').getBoundingClientRect();
  const out = [];
  for (const g of page.querySelectorAll('.gm-port svg g.node')) {
    const r = g.getBoundingClientRect();
    const shown = r.right > port.left && r.left < port.right && r.bottom > port.top && r.top < port.bottom;
    if (shown && r.left < port.left - 1) out.push(g.textContent.trim().slice(0, 40));
  }
  return out;
}"""


def launch(playwright):
    """Chromium, headless, from a ``sync_playwright()`` context."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)


def stop(server: subprocess.Popen, log) -> None:
    """End a server the test started (killed if it does not stop in 20 s), close its log."""
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def wait_until_serving(base: str, token: str, server: subprocess.Popen, log: Path) -> None:
    """Wait (at most 90 s) until the Jupyter server at ``base`` answers; fail with the end of
    its ``log`` if it stops or never does."""
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            return
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
