/// <reference types="vitest/config" />
// Vite build and dev-server settings for Cake's UI.
// `npm run dev` proxies /api to a running `cake serve` (CAKE_SERVE_URL,
// default http://127.0.0.1:8080) so the browser transport works unchanged.
import { defineConfig } from "vite";

const serveUrl = process.env.CAKE_SERVE_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  // Relative asset paths: dist/ is loaded both by Tauri and by `cake serve`.
  base: "./",
  oxc: {
    jsx: { runtime: "automatic", importSource: "preact" },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
  },
  server: {
    // Tauri's dev setup expects a fixed port.
    port: 5173,
    strictPort: true,
    proxy: {
      "/api": { target: serveUrl, changeOrigin: true },
    },
  },
  test: {
    include: ["tests/**/*.test.ts"],
    environment: "node",
  },
});
