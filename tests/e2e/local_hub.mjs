// A hub-shaped HTTP server on loopback for the browser tests: it serves one
// model folder as the repos it is asked for, the way the Hugging Face hub
// does. `GET /api/models/<org>/<name>/revision/main` lists the files;
// `HEAD`/`GET /<org>/<name>/resolve/main/<file>` answers small files
// directly and redirects the weights to `/cdn/<sha256>`, which sends them
// in small paced chunks so a progress bar has something to show.

import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const WEIGHTS = "model.safetensors";
const CHUNK_BYTES = 4096;

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts the hub on 127.0.0.1; resolves to `{ endpoint, requests, close }`.
 * `requests` lists every path asked for; `chunkPauseMs` paces the weights.
 */
export async function startLocalHub(folder, { chunkPauseMs = 20 } = {}) {
  const files = new Map(
    readdirSync(folder)
      .filter((name) => !name.startsWith("reference."))
      .map((name) => [name, readFileSync(path.join(folder, name))]),
  );
  const weightsSha = sha256(files.get(WEIGHTS));
  const requests = [];

  const server = createServer(async (request, response) => {
    const url = new URL(request.url, "http://hub");
    requests.push(url.pathname);
    const info = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/main$/);
    if (info) {
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify({ id: info[1], sha: COMMIT, siblings: [...files.keys()].map((f) => ({ rfilename: f })) }));
      return;
    }
    const resolve = url.pathname.match(/^\/[^/]+\/[^/]+\/resolve\/main\/(.+)$/);
    if (resolve && files.has(resolve[1])) {
      const bytes = files.get(resolve[1]);
      response.setHeader("x-repo-commit", COMMIT);
      if (resolve[1] === WEIGHTS) {
        response.writeHead(302, {
          location: `/cdn/${weightsSha}`,
          "x-linked-etag": `"${weightsSha}"`,
          "x-linked-size": String(bytes.length),
        });
        response.end();
        return;
      }
      response.setHeader("etag", `"${sha256(bytes).slice(0, 40)}"`);
      response.setHeader("content-length", String(bytes.length));
      response.end(request.method === "HEAD" ? undefined : bytes);
      return;
    }
    if (url.pathname === `/cdn/${weightsSha}`) {
      const bytes = files.get(WEIGHTS);
      const start = Number((request.headers.range ?? "").match(/^bytes=(\d+)-$/)?.[1] ?? 0);
      const headers = { "content-length": String(bytes.length - start) };
      if (start > 0) headers["content-range"] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
      response.writeHead(start > 0 ? 206 : 200, headers);
      for (let at = start; at < bytes.length && !response.destroyed; at += CHUNK_BYTES) {
        response.write(bytes.subarray(at, at + CHUNK_BYTES));
        await sleep(chunkPauseMs);
      }
      response.end();
      return;
    }
    response.writeHead(404);
    response.end("Entry not found");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
