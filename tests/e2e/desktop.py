#!/usr/bin/env python3
"""The real desktop window under Xvfb, driven over WebDriver by tauri-driver.

Starts Xvfb (unless a display is set), `tauri-driver` (which drives the app
through Debian's WebKitWebDriver), opens the `cake` binary's window with a
private data folder holding the default model, checks the window shows the
UI, calls the app through Tauri IPC, sends one chat message through the UI
and waits for the streamed reply, and writes screenshots of the window and
of the whole screen to target/e2e/.

Usage: python tests/e2e/desktop.py path/to/cake path/to/tauri-driver
Standard library only.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "e2e"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


class WebDriver:
    """The few WebDriver calls this test needs, over plain HTTP."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    def request(self, method: str, path: str, body=None, timeout=120):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return json.loads(response.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: {e.code} {e.read()[:500]!r}") from None

    def start(self, application: Path):
        caps = {"capabilities": {"alwaysMatch": {"tauri:options": {"application": str(application)}}}}
        self.session = self.request("POST", "/session", caps)["sessionId"]

    def s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def find(self, css: str, timeout=60):
        deadline = time.time() + timeout
        while True:
            try:
                found = self.request("POST", self.s("/element"), {"using": "css selector", "value": css})
                return next(iter(found.values()))
            except RuntimeError:
                if time.time() > deadline:
                    raise
                time.sleep(0.25)

    def run(self, script: str, *args):
        return self.request("POST", self.s("/execute/sync"), {"script": script, "args": list(args)})

    def run_async(self, script: str, *args):
        return self.request("POST", self.s("/execute/async"), {"script": script, "args": list(args)})

    def type_into(self, element: str, text: str):
        self.request("POST", self.s(f"/element/{element}/value"), {"text": text})

    def screenshot(self, path: Path):
        path.write_bytes(base64.b64decode(self.request("GET", self.s("/screenshot"))))

    def quit(self):
        if self.session:
            try:
                self.request("DELETE", self.s(""), timeout=20)
            except Exception:
                pass


def wait_for_port(port: int, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port}")


def main() -> int:
    cake, tauri_driver = Path(sys.argv[1]).resolve(), sys.argv[2]
    OUT.mkdir(parents=True, exist_ok=True)
    processes = []
    tmp = Path(tempfile.mkdtemp(prefix="cake-desktop-"))
    try:
        env = dict(os.environ)
        if not env.get("DISPLAY"):
            display = ":97"
            processes.append(subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"]))
            env["DISPLAY"] = display
            time.sleep(1.0)
        (tmp / "data" / "models").mkdir(parents=True)
        (tmp / "data" / "models" / default_model().name).symlink_to(default_model())
        env.update(CAKE_DATA_DIR=str(tmp / "data"), HF_HUB_CACHE=str(tmp / "hf"), RAYON_NUM_THREADS="2",
                   XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "cache"))
        port = free_port()
        processes.append(subprocess.Popen([tauri_driver, "--port", str(port)], env=env))
        wait_for_port(port)

        driver = WebDriver(port)
        started = time.time()
        driver.start(cake)
        try:
            driver.find('[data-testid="model-select"]')
            print(f"window with the UI after {time.time() - started:.1f} s")

            info = driver.run_async(
                "const done = arguments[arguments.length - 1];"
                "window.__TAURI__.core.invoke('app_call', {command: 'app_info', args: {}})"
                ".then(done, e => done({error: String(e)}));"
            )
            assert info.get("default_model_id") == "default", info

            driver.run(
                "const s = document.querySelector('[data-testid=\"model-select\"]');"
                "s.value = 'default'; s.dispatchEvent(new Event('change', {bubbles: true}));"
            )
            box = driver.find('[data-testid="chat-input"]')
            driver.type_into(box, "Say hello to the desktop.\ue007")
            driver.find('[data-testid="reply-stats"]', timeout=180)
            reply = driver.run(
                "const m = [...document.querySelectorAll('[data-testid=\"message\"][data-role=\"assistant\"]')];"
                "return m.length ? m[m.length - 1].innerText : '';"
            )
            assert reply.strip(), "the reply is empty"
            print(f"reply through Tauri IPC: {reply.strip()[:80]!r}")
            driver.screenshot(OUT / "desktop-window.png")
            if shutil.which("import") and Path("/usr/bin/import").exists():
                subprocess.run(["/usr/bin/import", "-window", "root", str(OUT / "desktop-screen.png")],
                               env=env, check=False)
            print(f"screenshots in {OUT}")
        finally:
            driver.quit()
    finally:
        for p in reversed(processes):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
