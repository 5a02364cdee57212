#!/usr/bin/env bash
# Installs the system packages Cake's build and tests need, when missing:
# a C toolchain, Python with pip/venv, Node.js/npm, the WebKitGTK stack the
# desktop window (Tauri) builds against, and for the end-to-end tests
# Chromium, Xvfb, WebKitWebDriver, ImageMagick, debootstrap (a clean root
# for the package test), the desktop-entry and AppStream validators, and
# espeak-ng (LuxTTS's phonemizer), and Mesa's lavapipe (a Vulkan driver on the
# CPU: the GPU backend's tests run on it).
# On Debian/Ubuntu as root (or with sudo); elsewhere it names what is missing.
set -euo pipefail

missing=()
need_cmd() { command -v "$1" >/dev/null || missing+=("$2"); }
need_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" || missing+=("$1"); }

need_cmd cc build-essential
need_cmd pkg-config pkg-config
need_cmd python3 python3
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
python3 -m venv -h >/dev/null 2>&1 || missing+=(python3-venv)
need_cmd node nodejs
need_cmd npm npm
if command -v dpkg-query >/dev/null; then
  for p in libwebkit2gtk-4.1-dev libsoup-3.0-dev libjavascriptcoregtk-4.1-dev libgtk-3-dev \
           librsvg2-dev libayatana-appindicator3-dev libssl-dev libdbus-1-dev libasound2-dev; do
    need_pkg "$p"
  done
fi
need_cmd chromium chromium
need_cmd Xvfb xvfb
need_cmd xauth xauth
need_cmd xclip xclip
need_cmd WebKitWebDriver webkit2gtk-driver
[ -x /usr/bin/import ] || missing+=(imagemagick)
need_cmd debootstrap debootstrap
need_cmd desktop-file-validate desktop-file-utils
need_cmd appstreamcli appstream
# LuxTTS's phonemizer (run as a program: espeak-ng is GPL-3.0).
need_cmd espeak-ng espeak-ng
# The Vulkan loader and lavapipe for the GPU backend's tests; vulkaninfo names
# the device Cake would pick.
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ] \
  || missing+=(mesa-vulkan-drivers)
need_cmd vulkaninfo vulkan-tools

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
