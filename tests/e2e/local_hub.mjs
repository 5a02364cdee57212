// A hub-shaped HTTP server on loopback for the browser tests: it serves one
// model folder as the repos it is asked for, the way the Hugging Face hub
// does. `GET /api/models/<org>/<name>/revision/main` lists the files;
// `HEAD`/`GET /<org>/<name>/resolve/main/<file>` answers small files
// directly and redirects the weights to `/cdn/<sha256>`, which sends them
// in small paced chunks so a progress bar has something to show. Repos of
// GGUF files can be added by name: `GET /api/models?search=` finds them and
// `GET /api/models/<org>/<name>/tree/main` lists their files with sizes.

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
 * `requests` lists every path asked for; `chunkPauseMs` paces the weights;
 * `ggufRepos` maps repo ids to the GGUF files (paths) they hold.
 */
export async function startLocalHub(folder, { chunkPauseMs = 20, ggufRepos = {} } = {}) {
  const files = new Map(
    readdirSync(folder)
      // The fixture's references and its llama.cpp conversion are not part of the repo it stands for.
      .filter((name) => !name.startsWith("reference.") && !name.endsWith(".gguf"))
      .map((name) => [name, readFileSync(path.join(folder, name))]),
  );
  const weightsSha = sha256(files.get(WEIGHTS));
  const requests = [];
  // GGUF repos: id → Map(file name → bytes); every large object by its hash.
  const gguf = new Map(
    Object.entries(ggufRepos).map(([id, paths]) => [id, new Map(paths.map((p) => [path.basename(p), readFileSync(p)]))]),
  );
  const objects = new Map([[weightsSha, files.get(WEIGHTS)]]);
  for (const repoFiles of gguf.values()) for (const bytes of repoFiles.values()) objects.set(sha256(bytes), bytes);

  const server = createServer(async (request, response) => {
    const url = new URL(request.url, "http://hub");
    requests.push(url.pathname);
    const json = (value) => {
      response.setHeader("content-type", "application/json");
      response.end(JSON.stringify(value));
    };
    if (url.pathname === "/api/models") {
      const text = (url.searchParams.get("search") ?? "").toLowerCase();
      json([...gguf.keys()].filter((id) => id.toLowerCase().includes(text)).map((id) => ({ id, downloads: 4321, likes: 5 })));
      return;
    }
    const tree = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/tree\/main$/);
    if (tree && gguf.has(tree[1])) {
      const entries = [...gguf.get(tree[1])].map(([name, bytes]) => ({
        type: "file",
        path: name,
        size: 134,
        lfs: { oid: sha256(bytes), size: bytes.length, pointerSize: 134 },
      }));
      json([{ type: "file", path: "README.md", size: 12 }, ...entries]);
      return;
    }
    const info = url.pathname.match(/^\/api\/models\/([^/]+\/[^/]+)\/revision\/main$/);
    if (info) {
      const names = gguf.has(info[1]) ? [...gguf.get(info[1]).keys()] : [...files.keys()];
      json({ id: info[1], sha: COMMIT, siblings: names.map((f) => ({ rfilename: f })) });
      return;
    }
    const resolve = url.pathname.match(/^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/);
    const repoFiles = resolve && (gguf.get(resolve[1]) ?? files);
    if (resolve && repoFiles.has(resolve[2])) {
      const bytes = repoFiles.get(resolve[2]);
      response.setHeader("x-repo-commit", COMMIT);
      if (resolve[2] === WEIGHTS || resolve[2].endsWith(".gguf")) {
        const sha = sha256(bytes);
        response.writeHead(302, {
          location: `/cdn/${sha}`,
          "x-linked-etag": `"${sha}"`,
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
    const object = url.pathname.match(/^\/cdn\/([0-9a-f]{64})$/);
    if (object && objects.has(object[1])) {
      const bytes = objects.get(object[1]);
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
