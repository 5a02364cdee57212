"""A small WebDriver client over plain HTTP (standard library only), shared
by the end-to-end tests that drive the desktop window through tauri-driver.
"""

import base64
import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# How often one WebDriver request is sent when tauri-driver drops it unanswered.
TRANSPORT_ATTEMPTS = 3


class WebDriver:
    """The few WebDriver calls this test needs, over plain HTTP."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    def request(self, method: str, path: str, body=None, timeout=120):
        data = None if body is None else json.dumps(body).encode()
        # tauri-driver forwards each request over a pooled connection to
        # WebKitWebDriver, which closes every connection after its answer
        # (urllib asks for that). When a request arrives before tauri-driver
        # has seen the close, it is written to the dead socket and tauri-driver
        # drops our connection without an answer; it has retries of such
        # requests turned off. WebKitWebDriver never read that request, so
        # sending it again is safe. Measured here: about one request in a few
        # hundred, which failed roughly every second desktop run.
        for attempt in range(1, TRANSPORT_ATTEMPTS + 1):
            req = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=timeout) as response:
                    return json.loads(response.read() or b"{}").get("value")
            except urllib.error.HTTPError as e:
                raise RuntimeError(f"WebDriver {method} {path}: {e.code} {e.read()[:500]!r}") from None
            except (http.client.RemoteDisconnected, ConnectionResetError) as e:
                if attempt == TRANSPORT_ATTEMPTS:
                    raise
                print(f"tauri-driver dropped {method} {path} ({e!r}); sending it again", flush=True)
                time.sleep(0.2)

    def start(self, application: Path, args=()):
        options = {"application": str(application), "args": list(args)}
        caps = {"capabilities": {"alwaysMatch": {"tauri:options": options}}}
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


def click(driver: WebDriver, css: str, timeout=60):
    """Clicks the element, scrolled into view first as a user would (WebKit's
    driver does not scroll a panel inside the page to reach it)."""
    element = driver.find(css, timeout)
    driver.run("document.querySelector(arguments[0]).scrollIntoView({block: 'center'});", css)
    driver.request("POST", driver.s(f"/element/{element}/click"), {})


def set_field(driver: WebDriver, css: str, value: str):
    """Sets an input's or text area's value the way typing would (Preact listens to `input`)."""
    driver.find(css)
    driver.run(
        "const el = document.querySelector(arguments[0]);"
        "const setter = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), 'value').set;"
        "setter.call(el, arguments[1]); el.dispatchEvent(new Event('input', {bubbles: true}));"
        "el.dispatchEvent(new Event('change', {bubbles: true}));",
        css, value)


def wait_for(driver: WebDriver, script: str, what: str, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.run(script)
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")
