#!/usr/bin/env bash
# Installs the system packages Cake's build and tests need, when missing.
# On Debian/Ubuntu as root (or with sudo); elsewhere it names what to install.
set -euo pipefail

missing=()
command -v cc >/dev/null || missing+=(build-essential)
command -v python3 >/dev/null || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
python3 -m venv -h >/dev/null 2>&1 || missing+=(python3-venv)

if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null; then
    echo "missing system packages: ${missing[*]} (install them with your package manager)" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust from https://rustup.rs" >&2
  exit 1
fi
