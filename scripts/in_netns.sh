#!/usr/bin/env bash
# Runs a command inside a fresh network namespace with only loopback up, so
# that nothing it does (mDNS included) can reach a real network interface.
# Without root (no `ip netns`), runs it here and says so: tests then keep
# mDNS on IPv4 loopback by their own settings.
set -euo pipefail
name="cake-e2e-$$"
if [ "$(id -u)" = 0 ] && ip netns add "$name" 2>/dev/null; then
  trap 'ip netns del "$name"' EXIT
  ip -n "$name" link set lo up
  ip netns exec "$name" "$@"
else
  echo "note: not root, no network namespace: running in this one (mDNS restricted to loopback)" >&2
  "$@"
fi
