#!/usr/bin/env python3
"""Installs Cake's .deb into a clean Debian 12 root and uses it as a new user would.

1. A minimal Debian 12 root (`debootstrap --variant=minbase`, kept in
   `$CAKE_TEST_CACHE` or ~/.cache/cake-test and copied fresh for each run;
   downloaded packages are kept there too).
2. `apt-get install ./cake_*.deb` with only what the package declares
   (no recommends), then `cake --version` in the root: a linked library
   missing from the control file fails here. The desktop entry and the
   AppStream file must pass their validators.
3. Test tools only after that: Debian's WebKitWebDriver and tauri-driver.
4. A new user with an empty home starts Cake from the desktop entry's `Exec`
   line under Xvfb, in a network namespace with only loopback: the chat
   screen lists the packaged default model, a reply arrives, the model shows
   as loaded, and screenshots go to target/e2e/.
5. `apt-get remove cake`: the program is gone, the user's conversation stays.

Prints the package's size, the install time and the time from launch to
the first window. Needs root (chroot, mounts, network namespaces).

Usage: python tests/e2e/package_deb.py path/to/cake.deb path/to/tauri-driver
Standard library only.
"""

import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from webdriver import WebDriver, free_port, wait_for, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "e2e"
CACHE = Path(os.environ.get("CAKE_TEST_CACHE", Path.home() / ".cache" / "cake-test"))
MIRROR = os.environ.get("CAKE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("CAKE_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
USER = "cakeuser"
DESKTOP_ENTRY = "usr/share/applications/dev.cake.Cake.desktop"
# A copy of the minimal root with WebKit, its drivers and Cake installed takes
# 1.3 GB (measured), plus the downloaded packages the first time.
NEEDED_FREE_BYTES = 2_000_000_000
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def run(*cmd, **kwargs):
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(list(map(str, cmd)), check=True, **kwargs)


def base_root() -> Path:
    """The cached minimal Debian 12 root, made once with debootstrap."""
    base = CACHE / "bookworm-minbase"
    if (base / "etc" / "debian_version").exists():
        return base
    if shutil.which("debootstrap") is None:
        run("apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap", env=dict(os.environ, **APT_ENV))
    partial = CACHE / "bookworm-minbase.partial"
    shutil.rmtree(partial, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.time()
    run("debootstrap", "--variant=minbase", "bookworm", partial, MIRROR, stdout=subprocess.DEVNULL)
    partial.rename(base)
    print(f"debootstrap: {time.time() - started:.0f} s", flush=True)
    return base


class Chroot:
    """A fresh copy of the base root with /proc, /dev, the X socket and the apt cache mounted."""

    def __init__(self, base: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="cake-deb-root-", dir="/var/tmp"))
        self.mounts = []
        run("cp", "-a", f"{base}/.", self.dir)
        (self.dir / "etc" / "resolv.conf").write_text(Path("/etc/resolv.conf").read_text())
        (self.dir / "etc" / "apt" / "sources.list").write_text(
            f"deb {MIRROR} bookworm main\n"
            f"deb {MIRROR} bookworm-updates main\n"
            f"deb {SECURITY_MIRROR} bookworm-security main\n"
        )
        archives = CACHE / "apt-archives"
        (archives / "partial").mkdir(parents=True, exist_ok=True)
        self.mount(["-t", "proc", "proc"], "proc")
        self.mount(["--rbind", "/dev"], "dev")
        run("mount", "--make-rslave", self.dir / "dev")
        self.mount(["--bind", archives], "var/cache/apt/archives")
        Path("/tmp/.X11-unix").mkdir(mode=0o1777, exist_ok=True)
        self.mount(["--bind", "/tmp/.X11-unix"], "tmp/.X11-unix")

    def mount(self, how, inside: str):
        target = self.dir / inside
        target.mkdir(parents=True, exist_ok=True)
        run("mount", *how, target)
        self.mounts.append(target)

    def path(self, inside: str) -> Path:
        return self.dir / inside.lstrip("/")

    def run(self, script: str, user: str = "root", env: dict = None, **kwargs):
        """Runs a shell script inside the root, with a clean environment."""
        spec = [] if user == "root" else [f"--userspec={user}:{user}"]
        environment = dict(APT_ENV, HOME="/root" if user == "root" else f"/home/{user}", USER=user, **(env or {}))
        command = ["chroot", *spec, self.dir, "/usr/bin/env", "-i"]
        command += [f"{k}={v}" for k, v in environment.items()] + ["/bin/sh", "-c", script]
        print(f"+ [{user} in root] {script}", flush=True)
        return subprocess.run(command, check=True, **kwargs)

    def popen(self, argv, user: str, env: dict):
        command = ["chroot", f"--userspec={user}:{user}", self.dir, "/usr/bin/env", "-i"]
        command += [f"{k}={v}" for k, v in env.items()] + argv
        # Its own process group: tauri-driver leaves the app it started behind.
        return subprocess.Popen(command, start_new_session=True)

    def kill_everything_inside(self):
        """Kills every process whose root is this folder (the app outlives tauri-driver)."""
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and os.readlink(proc / "root") == str(self.dir):
                    os.kill(int(proc.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue

    def close(self):
        self.kill_everything_inside()
        time.sleep(0.5)
        for target in reversed(self.mounts):
            if subprocess.run(["umount", "-R", target]).returncode != 0:
                subprocess.run(["umount", "-R", "-l", target])
        still = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                 if line.split()[1].startswith(str(self.dir))]
        if still:
            print(f"not removing {self.dir}: still mounted: {still}", file=sys.stderr)
            return
        shutil.rmtree(self.dir, ignore_errors=True)


def exec_line(entry: Path) -> list:
    """The desktop entry's Exec command, field codes (%U, %f, …) dropped."""
    for line in entry.read_text().splitlines():
        if line.startswith("Exec="):
            return [arg for arg in shlex.split(line[len("Exec="):]) if not arg.startswith("%")]
    raise AssertionError(f"{entry} has no Exec line")


def enter_network_namespace(name: str):
    """Moves this (single-threaded) process into a fresh namespace with only loopback."""
    run("ip", "netns", "add", name)
    run("ip", "-n", name, "link", "set", "lo", "up")
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "setns")
    os.close(fd)


def use_the_installed_app(root: Chroot, tauri_driver: Path, display: str) -> float:
    """Starts Cake from its desktop entry as the new user; returns seconds to the first window."""
    shutil.copy(tauri_driver, root.path("/usr/local/bin/tauri-driver"))
    command = exec_line(root.path(DESKTOP_ENTRY))
    application = command[0] if "/" in command[0] else next(
        f"{d}/{command[0]}" for d in ("/usr/local/bin", "/usr/bin", "/bin") if root.path(f"{d}/{command[0]}").exists())
    print(f"desktop entry runs {command} → {application}", flush=True)
    port, native_port = free_port(), free_port()
    env = {"HOME": f"/home/{USER}", "USER": USER, "PATH": "/usr/local/bin:/usr/bin:/bin", "DISPLAY": display,
           "LANG": "C.UTF-8", "RAYON_NUM_THREADS": "2"}
    driver_command = ["tauri-driver", "--port", str(port), "--native-port", str(native_port)]
    driver_process = root.popen(driver_command, USER, env)
    try:
        # tauri-driver's port and that of the WebKitWebDriver it starts.
        wait_for_port(port)
        wait_for_port(native_port)
        driver = WebDriver(port)
        started = time.time()
        driver.start(Path(application), command[1:])
        try:
            driver.find('[data-testid="model-select"]')
            first_window = time.time() - started
            print(f"window with the UI after {first_window:.1f} s", flush=True)
            driver.screenshot(OUT / "package-first-window.png")
            label = wait_for(driver, "const s = document.querySelector('[data-testid=\"model-select\"]');"
                             "const label = s && s.selectedOptions.length ? s.selectedOptions[0].textContent : '';"
                             "return label.includes('default') ? label : null;",
                             "the packaged default model picked in the chat screen", timeout=30)
            box = driver.find('[data-testid="chat-input"]')
            driver.type_into(box, "Say hello to the new machine.\ue007")
            driver.find('[data-testid="reply-stats"]', timeout=180)
            reply = driver.run("const m = [...document.querySelectorAll('[data-testid=\"message\"][data-role=\"assistant\"]')];"
                               "return m.length ? m[m.length - 1].innerText : '';")
            assert reply.strip(), "the reply is empty"
            print(f"reply: {reply.strip()[:80]!r}", flush=True)
            label = driver.run("return document.querySelector('[data-testid=\"model-select\"]').selectedOptions[0].textContent")
            assert "loaded" in label, f"the chat screen shows the model loaded: {label!r}"
            driver.screenshot(OUT / "package-window.png")
            subprocess.run(["/usr/bin/import", "-display", display, "-window", "root", str(OUT / "package-screen.png")],
                           check=False)
        finally:
            driver.quit()
    finally:
        os.killpg(driver_process.pid, signal.SIGTERM)
        try:
            driver_process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(driver_process.pid, signal.SIGKILL)
            driver_process.wait()
        root.kill_everything_inside()
    return first_window


def main() -> int:
    deb, tauri_driver = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    if os.geteuid() != 0:
        print("the package test needs root (chroot, mounts, network namespaces)", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    for folder in (Path("/var/tmp"), next(p for p in (CACHE, *CACHE.parents) if p.exists())):
        free = shutil.disk_usage(folder).free
        print(f"free space in {folder}: {free / 1e9:.1f} GB", flush=True)
        if free < NEEDED_FREE_BYTES:
            print(f"the package test needs {NEEDED_FREE_BYTES / 1e9:.0f} GB free in {folder} for a Debian root "
                  f"with WebKit and Cake installed; it has {free / 1e9:.1f} GB", file=sys.stderr)
            return 1
    print(f"package: {deb.name}, {deb.stat().st_size / 1e6:.1f} MB", flush=True)
    base = base_root()
    processes = []
    root = Chroot(base)
    namespace = f"cake-deb-{os.getpid()}"
    try:
        shutil.copy(deb, root.path("/tmp/cake.deb"))
        root.run("apt-get update -qq")
        started = time.time()
        root.run("apt-get install -y -qq --no-install-recommends /tmp/cake.deb >/tmp/install.log 2>&1 "
                 "|| { tail -40 /tmp/install.log; exit 1; }")
        installed = time.time() - started
        print(f"installed in {installed:.0f} s (downloads cached in {CACHE / 'apt-archives'})", flush=True)
        root.run("cake --version")
        run("desktop-file-validate", root.path(DESKTOP_ENTRY))
        run("appstreamcli", "validate", "--no-net", root.path("/usr/share/metainfo/dev.cake.Cake.metainfo.xml"))
        root.run("apt-get install -y -qq --no-install-recommends webkit2gtk-driver >/dev/null")
        used = subprocess.run(["du", "-sxm", root.dir], check=True, capture_output=True, text=True).stdout.split()[0]
        print(f"the root with Cake and the test tools installed takes {used} MB", flush=True)
        root.run(f"useradd --create-home --shell /bin/sh {USER}")
        assert not root.path(f"/home/{USER}/.local").exists(), "the user starts with no Cake data"

        enter_network_namespace(namespace)
        display = ":93"
        processes.append(subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"]))
        time.sleep(1.0)
        first_window = use_the_installed_app(root, tauri_driver, display)

        conversations = list(root.path(f"/home/{USER}/.local/share/cake/conversations").glob("*.json"))
        assert conversations, "the chat was saved in the user's data folder"
        saved = json.loads(conversations[0].read_text())
        root.run("apt-get remove -y -qq cake >/dev/null")
        assert not root.path("/usr/bin/cake").exists(), "removing the package removes the program"
        assert not root.path("/usr/share/cake").exists(), "and its default model"
        assert conversations[0].exists(), "removing the package leaves the user's conversations"
        assert json.loads(conversations[0].read_text()) == saved
        print(f"after removal the conversation is still there: {conversations[0].name}")
        print(f"summary: package {deb.stat().st_size / 1e6:.1f} MB, install {installed:.0f} s, "
              f"launch to first window {first_window:.1f} s")
    finally:
        for p in processes:
            p.terminate()
            p.wait()
        root.close()
        subprocess.run(["ip", "netns", "del", namespace], check=False, stderr=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
