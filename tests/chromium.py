"""What the browser tests share: Debian's Chromium started headless, and a server stopped."""

from __future__ import annotations

import subprocess

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
