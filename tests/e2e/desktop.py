#!/usr/bin/env python3
"""The real desktop window under Xvfb, driven over WebDriver by tauri-driver.

Starts Xvfb (unless a display is set), `tauri-driver` (which drives the app
through Debian's WebKitWebDriver), opens the `cake` binary's window with a
private data folder holding the default model, checks the window shows the
UI, calls the app through Tauri IPC, sends one chat message through the UI
and waits for the streamed reply; checks the view follows five more replies,
copies one to the X clipboard, turns the
theme dark, and serves the OpenAI API from the Models screen's switch (a
real request with and without its key). Then two `cake worker` processes join
(mDNS on IPv4 loopback only): the test sets the cluster key in the Cluster
screen, looks for workers, reloads the model and checks that the layer bar
is split over three machines and that a reply comes through them.
Screenshots of the window and of the whole screen go to target/e2e/.
Run it inside a network namespace of its own where possible
(scripts/in_netns.sh): mDNS then never reaches a real interface.

Usage: python tests/e2e/desktop.py path/to/cake path/to/tauri-driver
Standard library only.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from webdriver import WebDriver, click, set_field, wait_for, wait_for_port, free_port

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "e2e"


def default_model() -> Path:
    data = os.environ.get("CAKE_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "cake"
    )
    return Path(data) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


CLUSTER_KEY = "desktop cluster test key"


def start_worker(cake: Path, name: str, data: Path, env: dict, advertised: bool = True):
    """A `cake worker` advertised over loopback mDNS (or not advertised at
    all); returns the process and its address once it listens."""
    mdns = ["--mdns-iface", "lo"] if advertised else ["--no-mdns"]
    proc = subprocess.Popen(
        [str(cake), "worker", "--name", name, "--port", "0", "--host", "127.0.0.1", *mdns],
        env=dict(env, CAKE_DATA_DIR=str(data), CAKE_CLUSTER_KEY=CLUSTER_KEY, RAYON_NUM_THREADS="1"),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        try:
            ready = json.loads(line)
        except ValueError:
            continue
        if isinstance(ready, dict) and "ready" in ready:
            # Keep draining its output so it never blocks on a full pipe.
            import threading
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, ready["ready"]
    raise SystemExit(f"worker {name} did not start")


def cluster_check(driver: "WebDriver", cake: Path, tmp: Path, env: dict, processes: list, screen):
    """Two workers found over mDNS and one added by address join; the
    cluster view shows the layers over four machines."""
    for name in ("worker-a", "worker-b"):
        processes.append(start_worker(cake, name, tmp / name, env)[0])
    hidden, hidden_address = start_worker(cake, "worker-c", tmp / "worker-c", env, advertised=False)
    processes.append(hidden)
    click(driver, '[data-testid="cluster-button"]')
    driver.find('[data-testid="cluster-view"]')
    set_field(driver, '[data-testid="cluster-key"]', CLUSTER_KEY)
    set_field(driver, '[data-testid="cluster-mdns"]', "lo")
    set_field(driver, '[data-testid="cluster-discovery-timeout"]', "3")
    set_field(driver, '[data-testid="cluster-worker-addresses"]', hidden_address)
    click(driver, '[data-testid="cluster-save"]')
    wait_for(driver, "return document.querySelector('[data-testid=\"cluster-scan\"]') !== null",
             "the master role")
    click(driver, '[data-testid="cluster-scan"]')
    wait_for(driver,
             "return document.querySelectorAll('[data-testid=\"cluster-machine\"][data-state=\"authenticated\"]').length >= 3",
             "three authenticated workers", timeout=60)
    print("two workers found and one added by address, all authenticated")
    # Before loading: the placement preview compares plans over the machines found.
    click(driver, '[data-testid="cluster-preview-run"]')
    options = wait_for(driver,
                       "const rows = [...document.querySelectorAll('[data-testid=\"cluster-preview-option\"]')];"
                       "return rows.length >= 2 ? rows.map(r => r.dataset.chosen + ' ' + r.innerText) : null;",
                       "the placement preview", timeout=60)
    assert sum(o.startswith("true ") for o in options) == 1, f"one plan is picked: {options}"
    assert any("all 4 machines" in o and "tok/s" in o for o in options), f"all machines predicted: {options}"
    reason = driver.run("return document.querySelector('[data-testid=\"cluster-preview-reason\"]').innerText")
    assert "tok/s" in reason, reason
    print(f"placement preview: {reason}")
    driver.screenshot(OUT / "desktop-cluster-preview.png")
    # Reload the model so that it spreads over the cluster.
    row = '[data-testid="model-row"][data-model-id="default"]'
    click(driver, '[data-testid="models-button"]')
    click(driver, f'{row} [data-testid="model-unload"]')
    click(driver, f'{row} [data-testid="model-load"]')
    driver.find('[data-testid="model-loaded"]', timeout=180)
    click(driver, '[data-testid="cluster-button"]')
    nodes = wait_for(driver,
                     "const s = [...document.querySelectorAll('[data-testid=\"layer-segment\"]')];"
                     "return s.length === 4 ? s.map(e => e.dataset.node + ' ' + e.dataset.layers) : null;",
                     "the layer bar split over four machines")
    assert any(n.startswith("worker-c ") for n in nodes), f"the worker added by address holds layers: {nodes}"
    print(f"layer bar: {nodes}")
    driver.screenshot(OUT / "desktop-cluster.png")
    screen("desktop-cluster-screen.png")
    # A reply now runs through both workers.
    driver.run(
        "const s = document.querySelector('[data-testid=\"new-conversation\"]'); s && s.click();")
    driver.run(
        "const s = document.querySelector('[data-testid=\"model-select\"]');"
        "s.value = 'default'; s.dispatchEvent(new Event('change', {bubbles: true}));")
    box = driver.find('[data-testid="chat-input"]')
    driver.type_into(box, "Name a colour.\ue007")
    driver.find('[data-testid="reply-stats"]', timeout=180)
    status = driver.run_async(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI__.core.invoke('app_call', {command: 'cluster_status', args: {}}).then(done, e => done({error: String(e)}));")
    stages = status["run"]["stages"]
    busy = [s["node"] for s in stages if s["address"] and s["bytes_sent"] > 0]
    assert len(busy) == 3, f"all three workers took part: {stages}"
    print("a reply ran through the three workers")


def greedy_run(cake: Path, env: dict, *extra: str) -> dict:
    """`cake run --json` of the default model on one prompt, greedy."""
    out = subprocess.run(
        [str(cake), "run", "--prompt", "The desktop window closed, and", "--max-tokens", "12",
         "--temperature", "0", "--ignore-eos", "--json", *extra],
        env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def start_at_login_check(driver: WebDriver, tmp: Path):
    """The Start at login switch writes an autostart entry desktop-file-validate accepts, and removes it."""
    entry = tmp / "config" / "autostart" / "dev.cake.Cake.desktop"
    click(driver, '[data-testid="cluster-button"]')
    driver.find('[data-testid="cluster-view"]')
    click(driver, '[data-testid="start-at-login"]')
    wait_for(driver, "return document.querySelector('[data-testid=\"start-at-login\"]').checked",
             "Start at login on", timeout=10)
    assert entry.is_file(), f"{entry} written"
    checked = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr
    assert "--background" in entry.read_text()
    print(f"Start at login wrote {entry.name}; desktop-file-validate accepts it")
    click(driver, '[data-testid="start-at-login"]')
    wait_for(driver, "return !document.querySelector('[data-testid=\"start-at-login\"]').checked",
             "Start at login off", timeout=10)
    assert not entry.exists(), "turning it off removes the entry"


def follow_check(driver: WebDriver):
    """The window's view follows replies 2 to 6 to their end (WebKit scrolls on its own terms)."""
    driver.run("document.querySelector('[data-testid=\"sampling-panel\"]').open = true")
    set_field(driver, '[data-testid="max-tokens"]', "48")
    driver.run("document.querySelector('[data-testid=\"sampling-panel\"]').open = false")
    for n in range(2, 7):
        box = driver.find('[data-testid="chat-input"]')
        driver.type_into(box, f"Give me cake fact number {n}, in two sentences.\ue007")
        wait_for(driver, f"return document.querySelectorAll('[data-testid=\"reply-stats\"]').length >= {n} && "
                 "!document.querySelector('[data-testid=\"stop-button\"]')", f"reply {n}", timeout=180)
        # The end of a reply and the list's last scroll land in separate
        # frames: the view gets a moment to reach the end on its own.
        settle = time.monotonic() + 2.0
        while True:
            gap = driver.run("const m = document.querySelector('.messages');"
                             "return m.scrollHeight - m.scrollTop - m.clientHeight;")
            if gap < 40 or time.monotonic() > settle:
                break
            time.sleep(0.05)
        assert gap < 40, f"reply {n}: the view stopped {gap} px above the end"
    driver.screenshot(OUT / "desktop-followed.png")
    print("the view followed replies 2 to 6 to their end")


def gemma3_path() -> Path:
    """The published Gemma 3 270M file `make real-files` fetched."""
    return Path(os.environ.get("CAKE_GEMMA3_270M")
                or Path.home() / ".cache/cake-test/gemma-3-270m-q4_k_m.gguf")


def real_gemma_check(driver: WebDriver):
    """A published SentencePiece model in the window: Gemma 3 270M, picked in
    the model menu, answers a new conversation in Gemma's turns (the file has
    no chat template) without showing a turn marker."""
    options = driver.run("return [...document.querySelectorAll('[data-testid=\"model-select\"] option')]"
                         ".map(o => [o.value, o.textContent]);")
    [gemma] = [value for value, text in options if "gemma" in (value + text).lower()]
    click(driver, '[data-testid="new-conversation"]')
    driver.run("const s = document.querySelector('[data-testid=\"model-select\"]');"
               "s.value = arguments[0]; s.dispatchEvent(new Event('change', {bubbles: true}));", gemma)
    box = driver.find('[data-testid="chat-input"]')
    driver.type_into(box, "Name three colors.\ue007")
    wait_for(driver, "return document.querySelectorAll('[data-testid=\"reply-stats\"]').length >= 1 && "
             "!document.querySelector('[data-testid=\"stop-button\"]')", "Gemma's reply", timeout=180)
    reply = driver.run("const m = [...document.querySelectorAll('[data-testid=\"message\"][data-role=\"assistant\"]')];"
                       "return m.length ? m[m.length - 1].innerText : '';")
    assert reply.strip(), "Gemma's reply is empty"
    for marker in ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>"):
        assert marker not in reply, f"{marker} shown in Gemma's reply: {reply!r}"
    driver.screenshot(OUT / "desktop-gemma3.png")
    print(f"Gemma 3 270M (published Q4_K_M) in the window: {reply.strip()[:80]!r}")
    # The checks after this one expect the default model in memory.
    row = '[data-testid="model-row"][data-model-id="default"]'
    click(driver, '[data-testid="models-button"]')
    click(driver, f'{row} [data-testid="model-load"]')
    driver.find(f'{row} [data-testid="model-loaded"]', timeout=180)
    click(driver, '[data-testid="new-conversation"]')
    driver.run("const s = document.querySelector('[data-testid=\"model-select\"]');"
               "s.value = 'default'; s.dispatchEvent(new Event('change', {bubbles: true}));")


def openai_api_check(driver: WebDriver):
    """The Models screen's switch serves the OpenAI API on loopback, only with the key it shows, and stops."""
    import urllib.error
    import urllib.request

    def status_of(url: str, key: str | None) -> int:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = json.loads(response.read())
                assert any(m["id"] == "default" for m in body["data"]), body
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    click(driver, '[data-testid="models-button"]')
    wait_for(driver, "const s = document.querySelector('[data-testid=\"openai-api-switch\"]');"
             "return s && !s.disabled;", "the API switch's state", timeout=30)
    port = free_port()
    set_field(driver, '[data-testid="openai-api-port"]', str(port))
    click(driver, '[data-testid="openai-api-switch"]')
    base_url = wait_for(driver, "const u = document.querySelector('[data-testid=\"openai-api-url\"]');"
                        "return u && u.textContent;", "the API's address", timeout=30)
    assert base_url == f"http://127.0.0.1:{port}/v1", base_url
    click(driver, '[data-testid="openai-api-show-key"]')
    key = driver.run("return document.querySelector('[data-testid=\"openai-api-key\"]').textContent")
    assert len(key) == 32 and key.isalnum(), key
    assert status_of(base_url + "/models", key) == 200
    assert status_of(base_url + "/models", None) == 401
    driver.screenshot(OUT / "desktop-openai-api.png")
    click(driver, '[data-testid="openai-api-switch"]')
    wait_for(driver, "return !document.querySelector('[data-testid=\"openai-api-url\"]')", "serving stopped", timeout=30)
    try:
        urllib.request.urlopen(base_url + "/models", timeout=5)
        raise AssertionError("still serving after the switch went off")
    except urllib.error.URLError as refused:
        assert not isinstance(refused, urllib.error.HTTPError), refused
    print(f"the OpenAI API served on {base_url} with its key only, then stopped")
    click(driver, '[data-testid="models-button"]')


def window_extras_check(driver: WebDriver, env: dict):
    """In WebKit: a reply is copied to the system clipboard, and the theme button turns the window dark."""
    # A real click (WebDriver's): the clipboard takes text only from a user's gesture.
    click(driver, '[data-testid="message"][data-role="assistant"] [data-testid="copy-message"]')
    wait_for(driver, "return [...document.querySelectorAll('[data-testid=\"copy-message\"]')]"
             ".some(b => b.textContent.includes('Copied'))", "the copy confirmed", timeout=10)
    reply = driver.run("return document.querySelector('[data-testid=\"message\"][data-role=\"assistant\"] "
                       ".message-body').innerText")
    copied = subprocess.run(["xclip", "-o", "-selection", "clipboard"], env=env, capture_output=True, text=True,
                            timeout=10).stdout
    words = copied.split()
    assert words and words[0].strip("*_`#") in reply, (copied[:200], reply[:200])
    background = "return getComputedStyle(document.body).backgroundColor"
    light = driver.run(background)
    while driver.run("return document.querySelector('[data-testid=\"theme-button\"]').dataset.themeChoice") != "dark":
        click(driver, '[data-testid="theme-button"]')
    assert driver.run(background) != light, "the dark theme changed nothing"
    driver.screenshot(OUT / "desktop-dark.png")
    while driver.run("return document.querySelector('[data-testid=\"theme-button\"]').dataset.themeChoice") != "system":
        click(driver, '[data-testid="theme-button"]')
    print(f"copied {len(copied)} characters of the reply to the X clipboard; the theme button turned the window dark")


def second_launch_check(cake: Path, env: dict):
    """A second `cake` shows the first window and ends at once."""
    started = time.time()
    second = subprocess.run([str(cake)], env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and "already running" in second.stdout, (second.stdout, second.stderr[-1000:])
    print(f"a second launch handed over to the first window in {time.time() - started:.1f} s")


def background_worker_check(driver: WebDriver, cake: Path, env: dict):
    """With Join as worker on, closing the window leaves the worker serving."""
    port = free_port()
    set_field(driver, '[data-testid="cluster-worker-port"]', str(port))
    click(driver, '[data-testid="cluster-join-worker"]')
    click(driver, '[data-testid="cluster-save"]')
    deadline = time.time() + 30
    while True:
        status = driver.run_async(
            "const done = arguments[arguments.length - 1];"
            "window.__TAURI__.core.invoke('app_call', {command: 'cluster_status', args: {}}).then(done, e => done({error: String(e)}));")
        if status.get("role") == "worker" and status.get("worker"):
            break
        assert time.time() < deadline, f"the app did not become a worker: {status}"
        time.sleep(0.5)
    print(f"the window's app serves as a worker at {status['worker']['address']}")
    # As the window's close button does (Xvfb has no window manager to click).
    # Closes after this script has answered, so WebDriver is not left without its result.
    driver.run("setTimeout(() => window.__TAURI__.window.getCurrentWindow().close(), 300); return 'asked';")
    time.sleep(2.0)
    handles = []
    try:
        handles = driver.request("GET", driver.s("/window/handles"), timeout=20)
    except RuntimeError:
        pass
    assert not handles, f"the window is closed: {handles}"
    alone = greedy_run(cake, env)
    spread = greedy_run(cake, env, "--worker", f"127.0.0.1:{port}", "--cluster-key", CLUSTER_KEY,
                        "--max-memory", "80000000")
    assert spread["network_bytes"] > 0, "layers ran on the window-less worker"
    assert spread["tokens"] == alone["tokens"], f"through the worker {spread['tokens']} != alone {alone['tokens']}"
    print(f"window closed, worker still serving: {len(spread['tokens'])} tokens through it equal one process's")


HOSTILE_REPLY = (Path(__file__).parent / "hostile_reply.md").read_text()

# What the hostile reply's message body holds, read inside the window.
INSPECT_REPLY = """
const el = [...document.querySelectorAll('[data-testid="message"][data-role="assistant"] .message-body')].pop();
if (!el || !el.innerText.includes('raw')) return null;
return {
  elements: [...el.querySelectorAll('script, img, svg, iframe, object, embed, b')].map(e => e.tagName),
  unsafeLinks: [...el.querySelectorAll('a')].map(a => a.getAttribute('href')).filter(h => !/^https?:/.test(h || '')),
  handlers: [...el.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on')),
  strong: el.querySelectorAll('strong').length,
  text: el.innerText,
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
};
"""


def hostile_markdown_check(driver: "WebDriver"):
    """A saved reply full of HTML and script renders as text; the window's CSP blocks inline script."""
    conversation = {
        "id": "hostile_markdown", "title": "Hostile", "model_id": "default", "system_prompt": "", "sampling": {},
        "messages": [{"role": "user", "content": "Show me HTML"}, {"role": "assistant", "content": HOSTILE_REPLY}],
        "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:01Z",
    }
    saved = driver.run_async(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI__.core.invoke('app_call', {command: 'save_conversation', args: {conversation: arguments[0]}})"
        ".then(() => done('ok'), e => done(String(e)));", conversation)
    assert saved == "ok", saved
    driver.run("location.reload();")
    click(driver, '[data-testid="conversation-item"][data-conversation-id="hostile_markdown"] .conversation-open')
    found = wait_for(driver, INSPECT_REPLY, "the hostile reply", timeout=30)
    time.sleep(0.5)
    found = driver.run(INSPECT_REPLY)
    assert found["elements"] == [], found
    assert found["unsafeLinks"] == [], found
    assert found["handlers"] == [], found
    assert found["strong"] >= 1, "Markdown still renders"
    for literal in ("<script>", "onerror=", "<svg onload", "<iframe", "<b>raw</b>"):
        assert literal in found["text"], f"{literal} shown as text: {found['text']!r}"
    assert found["pwned"] is None, f"script from the reply ran: {found['pwned']}"
    inline = driver.run(
        "const s = document.createElement('script'); s.textContent = 'window.__inline = 1;';"
        "document.body.appendChild(s); return window.__inline === 1;")
    assert inline is False, "the window's CSP must refuse inline script"
    driver.screenshot(OUT / "desktop-hostile-markdown.png")
    print("a script-bearing reply renders as text; inline script is blocked by the CSP")


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
        # Gemma 3 as imported by an earlier session (the library's list of imported files).
        (tmp / "data" / "imports.json").write_text(json.dumps([str(gemma3_path())]))
        env.update(CAKE_DATA_DIR=str(tmp / "data"), HF_HUB_CACHE=str(tmp / "hf"), RAYON_NUM_THREADS="2",
                   XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "cache"))
        port, native_port = free_port(), free_port()
        # Its own process group: on SIGTERM tauri-driver kills WebKitWebDriver
        # but not the app window that WebKitWebDriver started.
        command = [tauri_driver, "--port", str(port), "--native-port", str(native_port)]
        processes.append(subprocess.Popen(command, env=env, start_new_session=True))
        # Both listen before a session is asked for: tauri-driver's own port
        # and WebKitWebDriver's, which it starts beside it (a session asked
        # for before that is refused upstream and dropped).
        wait_for_port(port)
        wait_for_port(native_port)

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

            def screen(name: str):
                if Path("/usr/bin/import").exists():
                    subprocess.run(["/usr/bin/import", "-window", "root", str(OUT / name)], env=env, check=False)

            screen("desktop-screen.png")
            follow_check(driver)
            window_extras_check(driver, env)
            openai_api_check(driver)
            hostile_markdown_check(driver)
            real_gemma_check(driver)
            cluster_check(driver, cake, tmp, env, processes, screen)
            second_launch_check(cake, env)
            start_at_login_check(driver, tmp)
            background_worker_check(driver, cake, env)
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
            if p.args[0] == tauri_driver:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
