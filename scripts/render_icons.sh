#!/usr/bin/env bash
# Renders icons/cake.svg into the PNGs the window and the Linux package use
# (the freedesktop hicolor sizes, RGBA as Tauri requires). The PNGs are
# committed; run this after editing the SVG (needs `rsvg-convert`, Debian's
# librsvg2-bin).
set -euo pipefail
cd "$(dirname "$0")/../icons"
for size in 32 48 64 128 256 512; do
    mkdir -p "hicolor/${size}x${size}"
    rsvg-convert -w "$size" -h "$size" cake.svg -o "hicolor/${size}x${size}/cake.png"
done
