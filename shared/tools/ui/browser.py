"""Headless Chromium driven over the DevTools protocol on a pipe (fd 3 in, fd 4 out,
messages ending in NUL): no websocket client, no WebDriver, no Python dependency.
For the page's browser test and its screenshot; blocking, so async callers run it in a
thread."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CALL_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.1
HIGH_FD = 10  # the pipes' ends are moved above 3 and 4 before the child takes those


class BrowserError(Exception):
    pass


def find_chromium() -> str | None:
    return next((p for name in CANDIDATES if (p := shutil.which(name))), None)


def _high(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium with one page (a tab) attached."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        binary = find_chromium()
        if binary is None:
            raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
        # A helper process still writing as the profile goes must not fail the close.
        self._profile = tempfile.TemporaryDirectory(
            prefix="ksched-chromium-", ignore_cleanup_errors=True
        )
        to_child_r, self._to_child = (_high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high(fd) for fd in os.pipe())

        def wire_pipe() -> None:  # in the child: its fds 3 and 4 are the protocol
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        args = [
            binary,
            "--headless=new",
            "--no-sandbox",  # root in CI containers has no user namespace sandbox
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}",
            "about:blank",
        ]
        self._proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipe,
            pass_fds=(3, 4),
            start_new_session=True,  # its helper processes go with it at close
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._next_id, self._buffer = 0, b""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        self.page("Page.enable")
        self.resize(width, height)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._signal_group(signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._signal_group(signal.SIGKILL)  # renderers and utilities left behind
        os.close(self._to_child)
        os.close(self._from_child)
        self._profile.cleanup()

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    # --- the protocol ---------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> Any:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}, **extra}
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + CALL_TIMEOUT_SECONDS
        while True:
            reply = self._read(deadline)
            if reply.get("id") != self._next_id:
                continue  # an event, or a late reply: nothing here waits on those
            if "error" in reply:
                raise BrowserError(f"{method}: {reply['error'].get('message')}")
            return reply.get("result", {})

    def page(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.call(method, params, sessionId=self._session)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise BrowserError("chromium did not answer")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise BrowserError("chromium exited")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    # --- what a test does -----------------------------------------------------------

    def resize(self, width: int, height: int) -> None:
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.page("Emulation.setDeviceMetricsOverride", metrics)

    def open(self, url: str) -> None:
        self.page("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        result = self.page(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = CALL_TIMEOUT_SECONDS) -> Any:
        """The expression's value once truthy (the page polls its API: no event to wait on)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"never true: {expression}")
            time.sleep(POLL_SECONDS)

    def screenshot(self, path: str, width: int) -> None:
        """The whole page as a PNG, `width` CSS pixels wide."""
        height = self.evaluate("document.documentElement.scrollHeight")
        self.resize(width, int(height))
        shot = self.page("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
