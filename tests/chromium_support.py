"""Headless Chromium driven over the DevTools protocol through ``--remote-debugging-pipe`` (file descriptors 3
and 4, one JSON message per NUL-terminated record): no websocket library and no browser download, only
Debian's ``chromium``. Collects console messages, uncaught exceptions and every network request."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
    "--window-size=1400,900",
]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One browser with one page target; ``send`` waits for its answer and keeps the events that pass."""

    def __init__(self, timeout: float = 60.0):
        exe = chromium_path()
        assert exe, "chromium is not installed"
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # the browser reads commands on fd 3 and writes answers on fd 4
            a, b = os.dup(to_child_r), os.dup(from_child_w)  # above 3 and 4, which the pipes may hold themselves
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_for(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read(deadline)
            if "method" in m:
                self.events.append(m)
                if m["method"] == method:
                    return m

    def open(self, path: Path) -> None:
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and error log entries seen so far."""
        out = []
        for m in self.events:
            p = m.get("params", {})
            if m["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
            elif m["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails', {})}")
            elif m["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def requests(self) -> list[str]:
        return [m["params"]["request"]["url"] for m in self.events if m["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
