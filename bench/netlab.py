#!/usr/bin/env python3
"""A small network of "machines" for cluster benchmarks (root only).

Each host is a network namespace joined to a bridge namespace by a veth
pair, with an address 10.78.<subnet>.<n>. A profile shapes every host's
link: bandwidth with `tc qdisc … tbf` on both ends of its veth (the kernel
here has no `netem`), and latency with a delaying TCP relay the master's
traffic to each worker goes through. A profile's latency is a round trip:
each direction is delayed by half of it, plus or minus half the jitter,
never reordering bytes.

    with Network(3, PROFILES["gigabit"]) as net:
        net.popen(1, ["cake", "worker", ...])
        relay = net.relay(0, ("10.78.1.2", 7000))   # host 0 reaches it at relay

Run as a module it is the relay itself:

    python bench/netlab.py relay --listen 127.0.0.1:0 --to 10.78.1.2:7000 --delay-ms 0.15 --jitter-ms 0
"""

import argparse
import ctypes
import os
import queue
import random
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    rate_mbit: float | None  # None: unshaped
    rtt_ms: float
    jitter_ms: float


PROFILES = {
    "unshaped": Profile("unshaped veth", None, 0.0, 0.0),
    "gigabit": Profile("gigabit LAN", 1000, 0.3, 0.0),
    "wifi": Profile("Wi-Fi", 300, 3.0, 1.0),
}


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, stderr=subprocess.PIPE)


class Network:
    """`count` hosts on one bridge, each link shaped by `profile`; removed on exit."""

    def __init__(self, count: int, profile: Profile, subnet: int = 1):
        self.profile = profile
        self.subnet = subnet
        tag = f"{os.getpid()}-{subnet}"
        self.bridge = f"cakelabbr-{tag}"
        self.hosts = [f"cakelab{i}-{tag}" for i in range(count)]
        self.children: list[subprocess.Popen] = []

    def address(self, host: int) -> str:
        return f"10.78.{self.subnet}.{host + 1}"

    def __enter__(self):
        try:
            ip("netns", "add", self.bridge)
            ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
            ip("-n", self.bridge, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                ip("netns", "add", host)
                inside, outside = f"veth{i}", f"port{i}"
                ip("link", "add", inside, "netns", host, "type", "veth", "peer", "name", outside, "netns", self.bridge)
                ip("-n", self.bridge, "link", "set", outside, "master", "br0")
                ip("-n", self.bridge, "link", "set", outside, "up")
                ip("-n", host, "addr", "add", f"{self.address(i)}/24", "dev", inside)
                ip("-n", host, "link", "set", inside, "up")
                ip("-n", host, "link", "set", "lo", "up")
                if self.profile.rate_mbit:
                    # Both directions: the host's sends leave through `inside`,
                    # what it receives leaves the bridge through `outside`.
                    for ns, dev in [(host, inside), (self.bridge, outside)]:
                        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                                        "rate", f"{self.profile.rate_mbit}mbit", "burst", "64kb", "latency", "20ms"],
                                       check=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for child in self.children:
            child.kill()
            child.wait()
        for ns in [*self.hosts, self.bridge]:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)

    def popen(self, host: int, args: list[str], **kwargs) -> subprocess.Popen:
        """Starts `args` inside `host`; killed when the network is removed."""
        child = subprocess.Popen(["ip", "netns", "exec", self.hosts[host], *args], **kwargs)
        self.children.append(child)
        return child

    def run(self, host: int, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.hosts[host], *args], **kwargs)

    def reach(self, host: int, target: tuple[str, int]) -> str:
        """An address inside `host` that reaches `target` with the profile's
        latency added (a relay whose own cost is taken off the delay it
        adds), or `target` itself when the profile adds none."""
        if self.profile.rtt_ms == 0 and self.profile.jitter_ms == 0:
            return f"{target[0]}:{target[1]}"
        each_way = max(0.0, self.profile.rtt_ms - self.relay_cost_ms()) / 2
        return self._relay(host, target, each_way, self.profile.jitter_ms / 2)

    def reach_from_all(self, host: int, port: int) -> str:
        """An address of `host` that every host reaches its `port` at, with
        the profile's latency added (a relay inside `host` on its own
        address, so a link from any other host to it is delayed alike), or
        the port itself when the profile adds none."""
        if self.profile.rtt_ms == 0 and self.profile.jitter_ms == 0:
            return f"{self.address(host)}:{port}"
        each_way = max(0.0, self.profile.rtt_ms - self.relay_cost_ms()) / 2
        target = (self.address(host), port)
        return self._relay(host, target, each_way, self.profile.jitter_ms / 2, listen=f"{self.address(host)}:0")

    def _relay(self, host: int, target: tuple[str, int], delay_ms: float, jitter_ms: float,
               listen: str = "127.0.0.1:0") -> str:
        relay = self.popen(host, [sys.executable, os.path.abspath(__file__), "relay", "--listen", listen,
                                  "--to", f"{target[0]}:{target[1]}", "--delay-ms", str(delay_ms),
                                  "--jitter-ms", str(jitter_ms)],
                           stdout=subprocess.PIPE, text=True)
        line = relay.stdout.readline().strip()
        if not line.startswith("relay on "):
            raise SystemExit(f"the relay did not start: {line!r}")
        return line.removeprefix("relay on ")

    ECHO_PORT = 7499

    def _echo(self, host: int) -> tuple[str, int]:
        """An echo server in `host` (started once)."""
        if not hasattr(self, "_echoes"):
            self._echoes = {}
        if host not in self._echoes:
            address = (self.address(host), self.ECHO_PORT)
            echo = self.popen(host, [sys.executable, os.path.abspath(__file__), "echo", "--listen",
                                     f"{address[0]}:{address[1]}"], stdout=subprocess.PIPE, text=True)
            echo.stdout.readline()
            self._echoes[host] = address
        return self._echoes[host]

    def _probe(self, address: str, samples: int = 200) -> float:
        """The median round trip (ms) of a 2 KiB message from host 0 to `address`."""
        host, port = address.rsplit(":", 1)
        probe = ("import socket,statistics,time\n"
                 f"s=socket.create_connection(('{host}',{port}))\n"
                 "s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
                 "t=[]\n"
                 f"for _ in range({samples}):\n"
                 " a=time.perf_counter();s.sendall(b'x'*2048);n=0\n"
                 " while n<2048:n+=len(s.recv(65536))\n"
                 " t.append(time.perf_counter()-a)\n"
                 "print(statistics.median(t)*1e3)\n")
        out = self.run(0, [sys.executable, "-c", probe], check=True, capture_output=True, text=True)
        return float(out.stdout)

    def relay_cost_ms(self) -> float:
        """What a relay adding no delay costs a round trip (measured once)."""
        if not hasattr(self, "_relay_cost"):
            echo = self._echo(1)
            direct = self._probe(f"{echo[0]}:{echo[1]}")
            relayed = self._probe(self._relay(0, echo, 0.0, 0.0))
            self._relay_cost = max(0.0, relayed - direct)
        return self._relay_cost

    def round_trip_ms(self, host: int) -> float:
        """The median round trip from host 0 to `host` and back, as the
        profile's link (and relay) make it."""
        return self._probe(self.reach(0, self._echo(host)))


def echo_main(listen: str) -> None:
    host, port = listen.rsplit(":", 1)
    server = socket.create_server((host, int(port)))
    print(f"echo on {listen}", flush=True)

    def serve(client: socket.socket):
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := client.recv(1 << 16):
            client.sendall(data)

    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


# The relay: every chunk read is written onward `delay ± jitter` later,
# never before the chunk read before it.

def pump(source: socket.socket, sink: socket.socket, delay: float, jitter: float) -> None:
    chunks: queue.Queue = queue.Queue()

    def write():
        while True:
            due, data = chunks.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                sink.sendall(data)
            except OSError:
                break
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    last = 0.0
    while True:
        try:
            data = source.recv(1 << 16)
        except OSError:
            data = b""
        due = max(last, time.monotonic() + delay + random.uniform(-jitter, jitter))
        last = due
        chunks.put((due, data or None))
        if not data:
            break
    writer.join()


def relay_main(listen: str, to: str, delay_ms: float, jitter_ms: float) -> None:
    # Sleeps end up to 50 µs late by default (the timer slack); 1 ns here.
    ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    host, port = listen.rsplit(":", 1)
    server = socket.create_server((host, int(port)))
    print(f"relay on {host}:{server.getsockname()[1]}", flush=True)
    target = to.rsplit(":", 1)
    delay, jitter = delay_ms / 1e3, min(jitter_ms, delay_ms) / 1e3

    def serve(client: socket.socket):
        upstream = socket.create_connection((target[0], int(target[1])))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        there = threading.Thread(target=pump, args=(client, upstream, delay, jitter), daemon=True)
        there.start()
        pump(upstream, client, delay, jitter)
        there.join()
        client.close()
        upstream.close()

    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a delaying TCP relay, or an echo server to time it")
    parser.add_argument("mode", choices=["relay", "echo"])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--to")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    a = parser.parse_args()
    if a.mode == "echo":
        echo_main(a.listen)
    else:
        relay_main(a.listen, a.to, a.delay_ms, a.jitter_ms)
