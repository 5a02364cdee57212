// The web UI in a real browser (Debian's Chromium, driven by playwright-core)
// against a real `cake serve` with the default model: pick the model, chat
// and watch the reply grow, stop a reply, reload and find the conversation,
// see a broken model fail to load without breaking the app, and speak:
// drop a voice WAV on the Speech screen, generate with the tiny VibeVoice
// checkpoint (made talkative), watch progress and the waveform, download the
// WAV, and see a dropped non-WAV file refused with the reason; drop a
// VibeVoice-Realtime voice preset and hear a long script while it is made,
// piece by piece, into one clip; and make a
// cluster key on the Cluster screen; and a first run with an empty library
// downloads its first model from a hub-shaped server on loopback, and the
// Models screen searches that hub and downloads the GGUF file picked; and
// a long prompt shows reading progress, an over-long conversation offers to
// drop its oldest turns, and conversations are renamed, searched and exported,
// across a restart; any message is copied, any reply made again with its
// versions kept, any message edited with the old branch kept, the theme
// chosen, and the keyboard shortcuts work; a picture dropped into the
// composer is read by a vision model and kept with its conversation; and every screen fits and is shot
// at 360, 768, 1280 and 1920 px, light and dark, the sidebar a drawer in the
// narrow ones and hidden on demand (remembered) in the wide ones.
//
// Run: CAKE_BIN=target/debug/cake node --test browser.test.mjs
// (the binary must have been built after `ui/dist`, so it embeds the UI).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, symlinkSync, writeFileSync, readFileSync, copyFileSync, readdirSync, existsSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir, homedir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { startLocalHub } from "./local_hub.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const cakeBin = path.resolve(process.env.CAKE_BIN ?? path.join(here, "../../target/debug/cake"));
const outDir = path.resolve(here, "../../target/e2e");
mkdirSync(outDir, { recursive: true });

function defaultModel() {
  const data = process.env.CAKE_DATA_DIR ?? path.join(process.env.XDG_DATA_HOME ?? path.join(homedir(), ".local/share"), "cake");
  return path.join(data, "models", "SmolLM2-135M-Instruct.Q4_1.gguf");
}

/** A Hugging Face cache holding a model whose config disagrees with its weights. */
function brokenModelCache(root) {
  const repo = path.join(root, "hf", "models--broken--mismatched");
  const snapshot = path.join(repo, "snapshots", "abc123");
  mkdirSync(snapshot, { recursive: true });
  mkdirSync(path.join(repo, "refs"), { recursive: true });
  writeFileSync(path.join(repo, "refs", "main"), "abc123");
  const fixture = path.join(here, "../fixtures/tiny/llama_tied");
  for (const name of readdirSync(fixture)) {
    if (name !== "reference.json" && !name.endsWith(".gguf")) copyFileSync(path.join(fixture, name), path.join(snapshot, name));
  }
  const config = JSON.parse(readFileSync(path.join(snapshot, "config.json"), "utf8"));
  config.intermediate_size = 96; // the weights say 64
  writeFileSync(path.join(snapshot, "config.json"), JSON.stringify(config));
}

/** Starts `cake serve` on a free loopback port with `env` added; resolves to `{ server, baseUrl }`. */
async function startCake(env) {
  const server = spawn(cakeBin, ["serve", "--host", "127.0.0.1", "--port", "0"], {
    env: { ...process.env, RAYON_NUM_THREADS: "2", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const baseUrl = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("cake serve did not start")), 30_000);
    createInterface({ input: server.stdout }).on("line", (line) => {
      const match = line.match(/^Cake is serving on (http:\/\/\S+?)\/?$/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
  });
  return { server, baseUrl };
}

let server;
let baseUrl;
let workDir;
let browser;

before(async () => {
  const root = mkdtempSync(path.join(tmpdir(), "cake-e2e-"));
  workDir = root;
  mkdirSync(path.join(root, "data", "models"), { recursive: true });
  symlinkSync(defaultModel(), path.join(root, "data", "models", path.basename(defaultModel())));
  brokenModelCache(root);
  ({ server, baseUrl } = await startCake({ CAKE_DATA_DIR: path.join(root, "data"), HF_HUB_CACHE: path.join(root, "hf") }));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
});

/** Lengths of the last assistant message's text, sampled until it stops changing. */
async function watchReply(page, { stopAfterGrowths = null } = {}) {
  const reply = page.locator('[data-testid="message"][data-role="assistant"]').last();
  await reply.waitFor({ timeout: 120_000 });
  const lengths = [];
  const deadline = Date.now() + 180_000;
  let stableSince = Date.now();
  while (Date.now() < deadline) {
    const length = (await reply.innerText()).length;
    if (lengths.length === 0 || length !== lengths[lengths.length - 1]) {
      lengths.push(length);
      stableSince = Date.now();
    }
    const streaming = await page.locator('[data-testid="stop-button"]').count();
    if (stopAfterGrowths !== null && lengths.length > stopAfterGrowths && streaming) {
      return { lengths, stopped: true };
    }
    if (!streaming && Date.now() - stableSince > 500) break;
    await page.waitForTimeout(50);
  }
  return { lengths, stopped: false };
}

async function openApp(page) {
  await page.goto(baseUrl + "/");
  await page.locator('[data-testid="model-select"]').waitFor();
  // The logo is the app's own icon, drawn (an emoji is an empty box where no emoji font is installed).
  const icon = await page.locator('[data-testid="app-icon"]').evaluate((img) => ({ loaded: img.complete, width: img.naturalWidth }));
  assert.deepEqual(icon, { loaded: true, width: 128 }, "the app icon is drawn");
}

async function send(page, text) {
  const input = page.locator('[data-testid="chat-input"]');
  await input.fill(text);
  await input.press("Enter");
}

test("chat streams a reply, stops on Escape, and survives a reload", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  // Keep replies short: this small model rambles until its token budget.
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await page.locator('[data-testid="max-tokens"]').fill("96");

  await send(page, "Write a short poem about a cake.");
  const first = await watchReply(page);
  assert.ok(first.lengths.length >= 4, `the reply should grow token by token, saw lengths ${first.lengths}`);
  assert.ok(first.lengths.at(-1) > 20, "the reply has text");
  await page.locator('[data-testid="reply-stats"]').last().waitFor();
  const stats = await page.locator('[data-testid="reply-stats"]').last().innerText();
  assert.match(stats, /tok\/s|tokens\/s/i, `stats: ${stats}`);
  // The first reply waited for the model to load, and says how long.
  assert.match(stats, /after loading the model for \d/, `stats: ${stats}`);
  // A reply cut by the token budget says so; one that ended by itself does
  // not. The end-of-text token counts, so a reply that ended by itself on
  // exactly its 96th token shows 96 tokens and no note.
  const tokens = Number(/\b(\d+) tokens\b/.exec(stats)?.[1]);
  const saysLimit = /stopped at the token limit/.test(stats);
  if (saysLimit) assert.equal(tokens, 96, `stats: ${stats}`);
  if (tokens < 96) assert.ok(!saysLimit, `stats: ${stats}`);
  assert.ok(tokens > 0 && tokens <= 96, `stats: ${stats}`);

  await send(page, "Tell me a very long story about a dragon who learns to bake, with many chapters.");
  const second = await watchReply(page, { stopAfterGrowths: 5 });
  assert.ok(second.stopped, "the reply was still streaming when we stopped it");
  // The view follows the new exchange: the list overflows, and its end is in view.
  const view = await page
    .locator(".messages")
    .evaluate((el) => ({ overflow: el.scrollHeight - el.clientHeight, gap: el.scrollHeight - el.scrollTop - el.clientHeight }));
  assert.ok(view.overflow > 100, `the messages overflow their view (${view.overflow} px)`);
  assert.ok(view.gap < 40, `the view follows the second reply, but its end is ${view.gap} px below`);
  await page.keyboard.press("Escape");
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached", timeout: 30_000 });
  const stoppedText = await page.locator('[data-testid="message"][data-role="assistant"]').last().innerText();
  await page.waitForTimeout(1500);
  const later = await page.locator('[data-testid="message"][data-role="assistant"]').last().innerText();
  assert.equal(later, stoppedText, "nothing arrives after Stop");
  assert.ok(stoppedText.length > 0, "the partial reply is kept");
  const marker = page.locator('[data-testid="message"][data-role="assistant"]').last().locator('[data-testid="reply-stopped"]');
  assert.equal(await marker.innerText(), "stopped by you", "a stopped reply says so");
  const gapAfterStop = await page.locator(".messages").evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
  assert.ok(gapAfterStop < 40, `the stopped reply's end stays in view (${gapAfterStop} px below)`);
  await page.screenshot({ path: path.join(outDir, "browser-chat.png") });

  await page.reload();
  await page.locator('[data-testid="message"]').first().waitFor();
  const roles = await page.locator('[data-testid="message"]').evaluateAll((els) => els.map((e) => e.dataset.role));
  assert.deepEqual(roles, ["user", "assistant", "user", "assistant"]);
  const texts = await page.locator('[data-testid="message"]').allInnerTexts();
  assert.ok(texts[0].includes("poem about a cake"), texts[0]);
  assert.ok(texts[3].includes(stoppedText.slice(0, 20).trim()), "the stopped reply was saved");

  // The reader scrolling up with the wheel while a reply streams keeps
  // their place: the rest of the reply does not pull the view back down.
  await send(page, "Tell me another long story, about a baker and a river.");
  await page.locator('[data-testid="stop-button"]').waitFor();
  const list = page.locator(".messages");
  await list.hover();
  await page.mouse.wheel(0, -400);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached", timeout: 120_000 });
  const gapAfterWheel = await list.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight);
  assert.ok(gapAfterWheel >= 300, `the view stays where the reader scrolled (${gapAfterWheel} px above the end)`);
  await page.close();
});

test("a broken model shows the engine's error and chat with another model still works", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await page.locator('[data-testid="models-button"]').click();
  const broken = page.locator('[data-testid="model-row"][data-model-id="hf:broken/mismatched"]');
  await broken.waitFor();
  await broken.locator('[data-testid="model-load"]').click();
  const error = page.locator('[data-testid="error-message"]').last();
  await error.waitFor({ timeout: 60_000 });
  const message = await error.innerText();
  assert.match(message, /config\.json implies/, message);
  await page.screenshot({ path: path.join(outDir, "browser-broken-model.png") });

  // Importing something that is not a model says why.
  const notes = path.join(workDir, "notes.txt");
  writeFileSync(notes, "shopping list: flour, sugar, eggs");
  await page.locator('[data-testid="import-path"]').fill(notes);
  await page.locator('[data-testid="import-button"]').click();
  await page.locator('[data-testid="error-message"]', { hasText: "is not a model" }).waitFor({ timeout: 30_000 });

  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  // A prompt longer than the model's context is refused with the reason, in the chat.
  await send(page, "bake ".repeat(9000));
  await page.locator('[data-testid="context-overflow"]', { hasText: "context length" }).waitFor({ timeout: 120_000 });

  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  await send(page, "Say hello.");
  const reply = await watchReply(page);
  assert.ok(reply.lengths.at(-1) > 0, "the default model still answers");
  await page.close();
});

test("a model that thinks first shows its reasoning folded above the answer, after a reload too", async () => {
  // The scripted Qwen3 fixture writes a <think> block, then its answer.
  const model = path.resolve(here, "../fixtures/tiny/qwen3_scripted");
  const script = JSON.parse(readFileSync(path.join(model, "script.json"), "utf8")).think_alone;
  const [thought, answer] = script.reply.replace("<think>", "").split("</think>").map((part) => part.trim());
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await importModel(page, model);
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption(`file:${model}`);
  await send(page, script.messages[0].content);
  await watchReply(page);

  const reply = page.locator('[data-testid="message"][data-role="assistant"]').last();
  const reasoning = reply.locator('[data-testid="reasoning"]');
  const check = async () => {
    assert.equal(await reasoning.evaluate((el) => el.open), false, "the reasoning starts folded");
    assert.equal(await reply.locator(".markdown").innerText(), answer, "the answer holds no reasoning");
    assert.match(await reasoning.locator("summary").innerText(), /^Reasoning · \d+ words$/);
    assert.equal(await reasoning.locator('[data-testid="reasoning-text"]').isVisible(), false);
    await reasoning.locator("summary").click();
    assert.equal(await reasoning.locator('[data-testid="reasoning-text"]').innerText(), thought);
  };
  await check();
  await page.screenshot({ path: path.join(outDir, "browser-reasoning.png") });
  await page.reload();
  await reply.waitFor();
  await check();
  await page.close();
});

/** A model reply that tries every way Markdown or HTML could run script or reach out (shared with desktop.py). */
const HOSTILE_REPLY = readFileSync(path.join(here, "hostile_reply.md"), "utf8");

test("a reply carrying script-bearing Markdown renders as text and loads nothing", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  const outside = [];
  page.on("request", (request) => {
    const url = request.url();
    if (/^https?:/.test(url) && !url.startsWith(baseUrl)) outside.push(url);
  });
  await openApp(page);
  const id = "hostile_markdown";
  const conversation = {
    id, title: "Hostile", model_id: "default", system_prompt: "", sampling: {},
    messages: [{ role: "user", content: "Show me HTML" }, { role: "assistant", content: HOSTILE_REPLY }],
    created_at: "2026-12-01T10:00:00Z", updated_at: "2026-12-01T10:00:01Z",
  };
  // The page's own fetch: same origin, JSON, with the session cookie the page received.
  const status = await page.evaluate(async (body) => {
    const response = await fetch("/app/save_conversation", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ conversation: body }),
    });
    return response.status;
  }, conversation);
  assert.equal(status, 200, "the UI's own request is accepted");
  await page.reload();
  await page.locator(`[data-testid="conversation-item"][data-conversation-id="${id}"] .conversation-open`).click();
  const reply = page.locator('[data-testid="message"][data-role="assistant"] .message-body');
  await reply.waitFor();
  await page.waitForTimeout(500);
  const found = await reply.evaluate((el) => ({
    elements: [...el.querySelectorAll("script, img, svg, iframe, object, embed, b")].map((e) => e.tagName),
    unsafeLinks: [...el.querySelectorAll("a")].map((a) => a.getAttribute("href")).filter((h) => !/^https?:/.test(h ?? "")),
    handlers: [...el.querySelectorAll("*")].flatMap((e) => [...e.attributes].map((a) => a.name)).filter((n) => n.startsWith("on")),
    strong: el.querySelectorAll("strong").length,
    text: el.innerText,
  }));
  assert.deepEqual(found.elements, [], "no element came from the reply's HTML");
  assert.deepEqual(found.unsafeLinks, [], "no javascript: or data: link");
  assert.deepEqual(found.handlers, [], "no event handler attribute");
  assert.ok(found.strong >= 1, "Markdown itself still renders");
  for (const literal of ["<script>", "onerror=", "<svg onload", "<iframe", "<b>raw</b>"]) {
    assert.ok(found.text.includes(literal), `the reply shows ${literal} as text: ${found.text}`);
  }
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "no script from the reply ran");
  assert.deepEqual(outside, [], "nothing was requested from outside Cake");
  await page.screenshot({ path: path.join(outDir, "browser-hostile-markdown.png") });
  await page.close();
});

test("a page of another site cannot drive Cake from the user's browser", async () => {
  // The attacker's page, on another origin (localhost:<port> is another site than 127.0.0.1).
  const evil = createServer((request, response) => {
    response.setHeader("Content-Type", "text/html");
    response.end(`<!doctype html><form id="f" method="post" enctype="text/plain" action="${baseUrl}/app/set_cluster_settings">
      <input name='{"key":"planted","x":"' value='"}'></form>
      <script>
        fetch("${baseUrl}/app/save_conversation", { method: "POST", mode: "no-cors", credentials: "include",
          headers: { "Content-Type": "text/plain" }, body: JSON.stringify({ conversation: { id: "planted" } }) })
          .finally(() => document.getElementById("f").submit());
      </script>`);
  });
  await new Promise((resolve) => evil.listen(0, "127.0.0.1", resolve));
  const evilUrl = `http://localhost:${evil.address().port}/`;
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  try {
    await openApp(page); // the user has Cake open: the browser holds its session cookie
    const before = await page.evaluate(() => fetch("/app/cluster_status", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }).then((r) => r.json()));
    const answers = [];
    const attacker = await browser.newPage();
    attacker.on("response", (response) => {
      if (response.url().startsWith(baseUrl)) answers.push(response.status());
    });
    await attacker.goto(evilUrl);
    const deadline = Date.now() + 15_000;
    while (answers.length < 1 && Date.now() < deadline) await attacker.waitForTimeout(100);
    await attacker.waitForTimeout(1000);
    await attacker.close();
    assert.ok(answers.length >= 1, "the attacker's requests reached Cake");
    assert.ok(answers.every((status) => status === 403 || status === 415), `all refused: ${answers}`);
    const after = await page.evaluate(() => fetch("/app/cluster_status", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }).then((r) => r.json()));
    assert.deepEqual(after, before, "the cluster settings are unchanged");
    const listed = await page.evaluate(() => fetch("/app/list_conversations", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }).then((r) => r.json()));
    assert.ok(!listed.conversations.some((c) => c.id === "planted"), "no conversation was planted");
  } finally {
    await page.close();
    evil.close();
  }
});

/** A real drop of files onto `selector`, as a person dragging them from a file manager does. */
async function dropFiles(page, selector, files) {
  const dataTransfer = await page.evaluateHandle((items) => {
    const transfer = new DataTransfer();
    for (const { name, bytes, type } of items) transfer.items.add(new File([new Uint8Array(bytes)], name, { type }));
    return transfer;
  }, files.map(({ name, bytes, type }) => ({ name, bytes: Array.from(bytes), type })));
  for (const kind of ["dragenter", "dragover", "drop"]) {
    await page.dispatchEvent(selector, kind, { dataTransfer });
  }
}

/** Imports the model folder `model` on the Models screen. */
async function importModel(page, model) {
  await page.locator('[data-testid="models-button"]').click();
  await page.locator('[data-testid="import-path"]').fill(model);
  await page.locator('[data-testid="import-button"]').click();
  await page.locator(`[data-testid="model-row"][data-model-id="file:${model}"]`).waitFor();
}

/** Imports the speech model folder `model` on the Models screen and picks it on the Speech screen. */
async function openSpeechWith(page, model) {
  await importModel(page, model);

  await page.locator('[data-testid="speech-button"]').click();
  await page.locator('[data-testid="speech-view"]').waitFor();
  await page.locator('[data-testid="speech-model"]').selectOption(`file:${model}`);
}

/**
 * Samples the Speech screen every 20 ms until the clip appears (at most
 * 2 minutes): the progress text and percentage, and the seconds live
 * playback has played.
 */
async function watchSpeaking(page) {
  const samples = [];
  const deadline = Date.now() + 120_000;
  while ((await page.locator('[data-testid="clip-result"]').count()) === 0 && Date.now() < deadline) {
    samples.push(
      await page.evaluate(() => {
        const progress = document.querySelector('[data-testid="speech-progress"]');
        const live = document.querySelector('[data-testid="live-playback"]');
        return {
          text: progress?.querySelector(".progress-detail")?.textContent ?? null,
          percent: progress?.querySelector('[role="progressbar"]')?.getAttribute("aria-valuenow") ?? null,
          played: live ? Number(live.getAttribute("data-played-seconds")) : null,
        };
      }),
    );
    await page.waitForTimeout(20);
  }
  return samples;
}

test("speech: drop a voice, generate with progress and a waveform, download the WAV", async () => {
  const model = path.join(workDir, "talkative-vibevoice");
  execFileSync("python3", [path.join(here, "../fixtures/make_talkative_vibevoice.py"), model]);
  const page = await browser.newPage({ acceptDownloads: true });
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await openSpeechWith(page, model);

  // A file that is not audio is refused with its name and the reason; nothing is added.
  await dropFiles(page, '[data-testid="voice-drop"]', [{ name: "notes.wav", bytes: Buffer.from("not audio at all"), type: "audio/wav" }]);
  const refusal = page.locator('[data-testid="error-message"]', { hasText: "notes.wav" });
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /not a valid WAV file/);
  assert.equal(await page.locator('[data-testid="voice-item"]').count(), 0);

  // A real WAV dropped on the zone becomes a voice with its duration and waveform.
  const voice = readFileSync(path.join(model, "voice0.wav"));
  await dropFiles(page, '[data-testid="voice-drop"]', [{ name: "alice.wav", bytes: voice, type: "audio/wav" }]);
  const item = page.locator('[data-testid="voice-item"]').first();
  await item.waitFor();
  assert.match(await item.locator('[data-testid="voice-duration"]').innerText(), /^0:01$|0\.5/);
  await item.locator('[data-testid="voice-waveform"]').waitFor();

  await page.locator('[data-testid="speech-script"]').fill("Speaker 1: Hello there, how are you?");
  const slot = page.locator('[data-testid="speech-voice-slot"]').first();
  const voiceId = await item.getAttribute("data-voice-id");
  await slot.locator('[data-testid="speech-voice-select"]').selectOption(voiceId);
  const settings = page.locator('[data-testid="speech-settings"]');
  if (!(await settings.evaluate((el) => el.open))) await settings.locator("summary").click();
  await page.locator('[data-testid="speech-max-seconds"]').fill("2");
  await page.locator('[data-testid="speech-seed"]').fill("5");
  // Every text the progress line shows, recorded in the page as it changes:
  // a tiny model's frames can come and go between two polls from here.
  await page.evaluate(() => {
    window.speechProgressSeen = [];
    const record = () => {
      const text = document.querySelector('[data-testid="speech-progress"]')?.textContent;
      if (text) window.speechProgressSeen.push(text);
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.locator('[data-testid="speech-generate"]').click();

  // Progress: frames and seconds of audio so far.
  await page.locator('[data-testid="clip-result"]').waitFor();
  const seen = await page.evaluate(() => window.speechProgressSeen);
  assert.ok(seen.some((t) => /frame/i.test(t)), `progress mentions frames: ${[...new Set(seen)]}`);
  // The peaks are computed after the clip appears: wait for them to be drawn.
  const waveform = page.locator('[data-testid="clip-result"] [data-testid="clip-waveform"]:not([data-bins="0"])');
  await waveform.waitFor();
  assert.ok(Number(await waveform.getAttribute("data-bins")) > 0);
  await page.screenshot({ path: path.join(outDir, "browser-speech.png") });

  // Save downloads a 24 kHz 16-bit mono WAV of 2 s (15 frames of 3200 samples).
  const [download] = await Promise.all([page.waitForEvent("download"), page.locator('[data-testid="clip-save"]').click()]);
  const saved = path.join(outDir, "browser-speech.wav");
  await download.saveAs(saved);
  const wav = readFileSync(saved);
  assert.equal(wav.toString("ascii", 0, 4), "RIFF");
  assert.equal(wav.readUInt32LE(24), 24000, "sample rate");
  assert.equal(wav.readUInt16LE(22), 1, "mono");
  assert.equal(wav.readUInt16LE(34), 16, "16-bit");
  assert.equal(wav.readUInt32LE(40), 15 * 3200 * 2, "data bytes");

  // The clip is listed and survives a reload.
  await page.reload();
  await page.locator('[data-testid="speech-button"]').click();
  await page.locator('[data-testid="clip-item"]').first().waitFor();
  await page.close();
});

test("speech: a Realtime preset voice plays while it is made, and a long script comes back as one clip in pieces", async () => {
  const model = path.resolve(here, "../fixtures/tiny/vibevoice_realtime");
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await openSpeechWith(page, model);
  // The screen says what this model speaks in, and where presets come from.
  assert.match(await page.locator('[data-testid="speech-model-needs"]').innerText(), /Realtime: one voice preset/);
  assert.match(await page.locator('[data-testid="speech-preset-hint"]').innerText(), /cannot be made from a WAV/);

  // A preset in Microsoft's torch.save format dropped on Voices becomes a preset voice.
  const preset = readFileSync(path.join(model, "voice.pt"));
  await dropFiles(page, '[data-testid="voice-drop"]', [{ name: "davis.pt", bytes: preset, type: "" }]);
  const item = page.locator('[data-testid="voice-item"][data-voice-kind="preset"]').first();
  await item.waitFor();
  await item.locator('[data-testid="voice-preset-badge"]').waitFor();
  const slot = page.locator('[data-testid="speech-voice-slot"]').first();
  await slot.locator('[data-testid="speech-voice-select"]').selectOption(await item.getAttribute("data-voice-id"));

  // A story of 360 sentences: many pieces, and long enough in the making
  // (about three seconds for this tiny model; 120 sentences were once made
  // before the page was first sampled) to hear it while it is made.
  const script = Array.from({ length: 360 }, (_, i) => `This is sentence number ${i + 1} of the story.`).join(" ");
  await page.locator('[data-testid="speech-script"]').fill(script);
  const settings = page.locator('[data-testid="speech-settings"]');
  if (!(await settings.evaluate((el) => el.open))) await settings.locator("summary").click();
  await page.locator('[data-testid="speech-seed"]').fill("3");
  const clipsBefore = await page.locator('[data-testid="clip-item"]').count();
  await page.locator('[data-testid="speech-generate"]').click();

  // While it is made: progress by piece, and audio heard before the end.
  const samples = await watchSpeaking(page);
  const generating = samples.filter((s) => s.text !== null && s.percent !== null && Number(s.percent) < 100);
  // Any audio heard counts: on a fast CPU the tiny model makes the whole
  // script in about a second, while playback has only just begun.
  const heardEarly = generating.filter((s) => s.played !== null && s.played > 0.05);
  assert.ok(heardEarly.length > 0, `audio plays before generation ends: ${JSON.stringify(samples.slice(-8))}`);
  const pieces = generating.map((s) => /^Piece (\d+) of (\d+)/.exec(s.text)).filter(Boolean);
  const counts = new Set(pieces.map((m) => m[2]));
  assert.equal(counts.size, 1, `one piece count: ${[...counts]}`);
  assert.ok(Number([...counts][0]) >= 3, `a long script makes several pieces: ${[...counts]}`);
  assert.ok(new Set(pieces.map((m) => m[1])).size >= 2, `progress moves piece to piece: ${pieces.map((m) => m[0])}`);

  // One clip holds all the pieces, and live playback goes on after it is saved.
  const result = page.locator('[data-testid="clip-result"]');
  await result.waitFor();
  await page.locator('[data-testid="clip-item"]').nth(clipsBefore).waitFor();
  assert.equal(await page.locator('[data-testid="clip-item"]').count(), clipsBefore + 1);
  const duration = /(\d+):(\d\d)/.exec(await result.locator(".clip-result-head .muted").innerText());
  assert.ok(Number(duration[1]) * 60 + Number(duration[2]) >= 10, `120 sentences take more than 10 s: ${duration[0]}`);
  await page.screenshot({ path: path.join(outDir, "browser-speech-realtime.png") });
  const live = page.locator('[data-testid="live-playback"]');
  if ((await live.count()) > 0) {
    await live.locator('[data-testid="live-playback-silence"]').click();
    await live.waitFor({ state: "detached" });
  }
  await page.close();
});

test("a reply is read aloud in the chat: its audio arrives as it is made, the button shows playing, then stopped", async () => {
  const model = path.resolve(here, "../fixtures/tiny/vibevoice_realtime");
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  // What the page receives from each `speak` stream, kept as it arrives.
  await page.addInitScript(() => {
    const fetchFirst = window.fetch;
    window.speakStreams = [];
    window.fetch = async (...args) => {
      const response = await fetchFirst(...args);
      if (!String(args[0]).endsWith("/app/speak") || !response.body) return response;
      const [seen, used] = response.body.tee();
      const record = { text: "", done: false };
      window.speakStreams.push(record);
      (async () => {
        const reader = seen.getReader();
        const decoder = new TextDecoder();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            record.text += decoder.decode(value, { stream: true });
          }
        } finally {
          record.done = true; // ended, or closed by the page once it had the last event
        }
      })();
      return new Response(used, { status: response.status, headers: response.headers });
    };
  });
  await openApp(page);
  await openSpeechWith(page, model);
  const preset = readFileSync(path.join(model, "voice.pt"));
  await dropFiles(page, '[data-testid="voice-drop"]', [{ name: "reader.pt", bytes: preset, type: "" }]);
  await page.locator('[data-testid="voice-item"][data-voice-kind="preset"]').first().waitFor();
  const clipsBefore = await page.locator('[data-testid="clip-item"]').count();
  await page.getByRole("button", { name: "Back to chat" }).click();

  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await page.locator('[data-testid="max-tokens"]').fill("32");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await send(page, "Tell me about cake.");
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });

  // Read aloud: the speech comes as audio events while it is made; nothing is kept.
  const reply = page.locator('[data-testid="message"][data-role="assistant"]').last();
  const button = reply.locator('[data-testid="read-aloud"]');
  const asked = page.waitForRequest((r) => r.url().endsWith("/app/speak"));
  await reply.hover();
  await button.click();
  await reply.locator('[data-testid="read-aloud"][data-reading="yes"]').waitFor();
  assert.match(await button.innerText(), /Stop reading/);
  assert.equal(JSON.parse((await asked).postData()).keep_clip, false);
  // It is heard while it is read.
  await page.waitForFunction(
    () => Number(document.querySelector('[data-testid="read-aloud"][data-reading="yes"]')?.dataset.heardSeconds ?? 0) > 0,
  );
  await page.screenshot({ path: path.join(outDir, "browser-read-aloud.png") });
  await page.waitForFunction(() => window.speakStreams[0]?.done);
  const events = (await page.evaluate(() => window.speakStreams[0].text))
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => JSON.parse(line.slice(5)));
  const audio = events.filter((event) => event.type === "audio");
  assert.ok(audio.length >= 2, `audio arrives in pieces as it is made: ${audio.length}`);
  assert.equal(events.at(-1).type, "done");
  assert.ok(events.at(-1).wav_base64 && !events.at(-1).clip, "nothing is kept as a clip");
  await reply.locator('[data-testid="read-aloud"][data-reading="no"]').waitFor({ timeout: 120_000 });
  assert.match(await button.innerText(), /Read aloud/);

  // Stopped at once by the same button.
  await button.click();
  await reply.locator('[data-testid="read-aloud"][data-reading="yes"]').waitFor();
  await button.click();
  await reply.locator('[data-testid="read-aloud"][data-reading="no"]').waitFor({ timeout: 5_000 });

  // Read replies aloud: the next reply is read by itself, and the switch is kept.
  await page.locator('[data-testid="auto-read"]').check();
  const readByItself = page.waitForRequest((r) => r.url().endsWith("/app/speak"), { timeout: 120_000 });
  await send(page, "And about bread?");
  const request = await readByItself;
  assert.equal(JSON.parse(request.postData()).keep_clip, false);
  await page.reload();
  await page.locator('[data-testid="auto-read"]').waitFor();
  assert.equal(await page.locator('[data-testid="auto-read"]').isChecked(), true);
  await page.locator('[data-testid="speech-button"]').click();
  await page.waitForTimeout(500);
  assert.equal(await page.locator('[data-testid="clip-item"]').count(), clipsBefore, "no clip was kept");
  await page.close();
});

test("speech: LuxTTS asks for a voice's words, plays while it is made, and a long text comes back as one 48 kHz clip", async () => {
  const model = path.resolve(here, "../fixtures/tiny/luxtts");
  const page = await browser.newPage({ acceptDownloads: true });
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await openSpeechWith(page, model);
  assert.match(await page.locator('[data-testid="speech-model-needs"]').innerText(), /LuxTTS: one WAV voice prompt and the words it says/);

  // A dropped WAV becomes a voice without words; choosing it says what is missing.
  const wav = readFileSync(path.resolve(here, "../fixtures/tiny/vibevoice/voice0.wav"));
  await dropFiles(page, '[data-testid="voice-drop"]', [{ name: "alice.wav", bytes: wav, type: "audio/wav" }]);
  const item = page.locator('[data-testid="voice-item"][data-voice-kind="prompt"]').first();
  await item.waitFor();
  assert.match(await item.locator('[data-testid="voice-transcript"]').innerText(), /No transcript/);
  const slot = page.locator('[data-testid="speech-voice-slot"]').first();
  await slot.locator('[data-testid="speech-voice-select"]').selectOption(await item.getAttribute("data-voice-id"));
  assert.match(await page.locator('[data-testid="speech-transcript-hint"]').innerText(), /what the voice says/);
  assert.ok(await page.locator('[data-testid="speech-generate"]').isDisabled(), "no words, no speech");

  // The words are written under the voice and kept across a reload.
  await item.locator('[data-testid="voice-transcript-edit"]').click();
  await item.locator('[data-testid="voice-transcript-input"]').fill("Hello there, this is my voice.");
  await item.locator('[data-testid="voice-transcript-save"]').click();
  await item.locator('[data-testid="voice-transcript"]', { hasText: "this is my voice" }).waitFor();
  await page.reload();
  await page.locator('[data-testid="speech-button"]').click();
  await page.locator('[data-testid="speech-model"]').selectOption(`file:${model}`);
  await item.locator('[data-testid="voice-transcript"]', { hasText: "this is my voice" }).waitFor();
  await slot.locator('[data-testid="speech-voice-select"]').selectOption(await item.getAttribute("data-voice-id"));
  await page.locator('[data-testid="speech-transcript-shown"]').waitFor();

  const script = Array.from({ length: 120 }, (_, i) => `This is sentence number ${i + 1} of the story.`).join(" ");
  await page.locator('[data-testid="speech-script"]').fill(script);
  const clipsBefore = await page.locator('[data-testid="clip-item"]').count();
  await page.locator('[data-testid="speech-generate"]').click();
  const samples = await watchSpeaking(page);
  const generating = samples.filter((s) => s.text !== null && s.percent !== null && Number(s.percent) < 100);
  assert.ok(
    generating.some((s) => s.played !== null && s.played > 0.2),
    `audio plays before generation ends: ${JSON.stringify(samples.slice(-8))}`,
  );
  const pieces = generating.map((s) => /^Piece (\d+) of (\d+)/.exec(s.text)).filter(Boolean);
  assert.ok(pieces.length > 0 && Number(pieces[0][2]) >= 10, `a long text makes many pieces: ${pieces.map((m) => m[0])}`);
  assert.ok(new Set(pieces.map((m) => m[1])).size >= 2, `progress moves piece to piece: ${pieces.map((m) => m[0])}`);

  // One clip holds every piece, at LuxTTS's 48 kHz.
  await page.locator('[data-testid="clip-item"]').nth(clipsBefore).waitFor();
  assert.equal(await page.locator('[data-testid="clip-item"]').count(), clipsBefore + 1);
  await page.screenshot({ path: path.join(outDir, "browser-speech-luxtts.png") });
  const [download] = await Promise.all([page.waitForEvent("download"), page.locator('[data-testid="clip-save"]').click()]);
  const saved = path.join(outDir, "browser-speech-luxtts.wav");
  await download.saveAs(saved);
  const clip = readFileSync(saved);
  assert.equal(clip.readUInt32LE(24), 48000, "sample rate");
  assert.ok(clip.readUInt32LE(40) / 2 / 48000 > 10, "120 sentences take more than 10 s");
  const live = page.locator('[data-testid="live-playback"]');
  if ((await live.count()) > 0) {
    await live.locator('[data-testid="live-playback-silence"]').click();
    await live.waitFor({ state: "detached" });
  }
  await page.close();
});

test("the Cluster screen generates a key, warns about a weak typed one, and never shows a saved key", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(30_000);
  try {
    await openApp(page);
    await page.locator('[data-testid="cluster-button"]').click();
    const key = page.locator('[data-testid="cluster-key"]');
    const keyState = page.locator('[data-testid="cluster-key-state"]');
    // mDNS stays on loopback: a test never browses the machine's real network.
    await page.locator('[data-testid="cluster-mdns"]').fill("lo");
    await key.fill("weak typed key");
    await page.locator('[data-testid="cluster-save"]').click();
    await page.locator('[data-testid="cluster-key-warning"]').waitFor();
    assert.match(await page.locator('[data-testid="cluster-key-warning"]').innerText(), /weak.*Generate key/s);
    assert.match(await keyState.innerText(), /typed key/);

    await page.locator('[data-testid="cluster-generate-key"]').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="cluster-key"]').value.startsWith("cake1-"));
    const generated = await key.inputValue();
    assert.match(generated, /^cake1-[a-z2-7]{8}(-[a-z]{6}){7}$/);
    assert.equal(await key.getAttribute("type"), "text", "a generated key is shown so it can be copied");
    assert.match(await page.locator('[data-testid="cluster-key-hint"]').innerText(), /Copy this key/);
    assert.equal(await page.locator('[data-testid="cluster-generated-key"]').innerText(), generated, "shown whole, to copy");
    await page.screenshot({ path: path.join(outDir, "browser-cluster-key.png") });
    await page.locator('[data-testid="cluster-save"]').click();
    await page.waitForFunction((id) => document.querySelector('[data-testid="cluster-key-state"]')?.textContent.includes(`cluster ${id}`), generated.slice(6, 14));
    assert.equal(await page.locator('[data-testid="cluster-key-warning"]').count(), 0, "a generated key is not weak");
    assert.equal(await key.inputValue(), "", "the saved key leaves the form");
    assert.equal(await key.getAttribute("type"), "password");
    assert.ok(!(await page.content()).includes(generated.slice(15)), "the saved key's words are nowhere on the page");

    // Looking for workers says so while it looks, and only then that none was seen.
    await page.locator('[data-testid="cluster-scan"]').click();
    await page.locator('[data-testid="cluster-looking"]').waitFor();
    assert.equal(await page.locator('[data-testid="cluster-no-workers"]').count(), 0);
    await page.locator('[data-testid="cluster-no-workers"]').waitFor();

    await page.locator('[data-testid="cluster-forget-key"]').click();
    await page.locator('[data-testid="confirm-button"]').click();
    await keyState.waitFor({ state: "detached" });
  } finally {
    await page.close();
  }
});

test("the GPU setting says what each choice finds, and a model loaded on the GPU shows its layers there", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  const gpu = page.locator('[data-testid="cluster-gpu"]');
  const hint = page.locator('[data-testid="cluster-gpu-hint"]');
  const choose = async (mode) => {
    if ((await gpu.count()) === 0) await page.locator('[data-testid="cluster-button"]').click();
    await gpu.selectOption(mode);
    await page.locator('[data-testid="cluster-save"]').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="cluster-save"]').disabled);
  };
  try {
    await openApp(page);
    await page.locator('[data-testid="cluster-button"]').click();
    assert.equal(await gpu.inputValue(), "off");
    assert.match(await hint.innerText(), /^Models run on the CPU\./);
    // Auto never takes a driver that computes on the CPU (lavapipe here).
    await gpu.selectOption("auto");
    const auto = await hint.innerText();
    assert.ok(/^Uses (?!llvmpipe)/.test(auto) || /^No GPU to use \(.+\): models run on the CPU\./.test(auto), auto);
    await gpu.selectOption("on");
    assert.match(await hint.innerText(), /^Uses .+\((Vulkan|Metal|Dx12), /);
    await page.screenshot({ path: path.join(outDir, "browser-gpu-setting.png") });
    await choose("on");

    await page.locator('[data-testid="models-button"]').click();
    const row = page.locator('[data-testid="model-row"][data-model-id="default"]');
    await row.locator('[data-testid="model-load"]').click();
    await row.locator('[data-testid="model-loaded"]').waitFor();
    const placed = page.locator('[data-testid="loaded-gpu"]');
    await placed.waitFor();
    assert.match(await placed.innerText(), /^Layers 0–29 on the GPU: .+/, "all 30 layers of the default model");
    await page.screenshot({ path: path.join(outDir, "browser-gpu-loaded.png") });
  } finally {
    // Back to the CPU (which unloads the model) for the tests after this one.
    await choose("off").catch(() => {});
    await page.close();
  }
});

test("error toasts stay clear of the composer and its buttons, wide and narrow", async () => {
  for (const [width, height] of [[1280, 800], [360, 740]]) {
    const page = await browser.newPage({ viewport: { width, height } });
    page.setDefaultTimeout(30_000);
    try {
      await openApp(page);
      if (width <= 860) await page.locator('[data-testid="sidebar-toggle"]').click();
      await page.locator('[data-testid="models-button"]').click();
      for (const path of ["/no/such/model-a.gguf", "/no/such/model-b.gguf", "/no/such/model-c.gguf", "/no/such/model-d.gguf"]) {
        await page.locator('[data-testid="import-path"]').fill(path);
        await page.locator('[data-testid="import-button"]').click();
        await page.locator(`[data-testid="error-message"]:has-text("${path}")`).waitFor();
      }
      await page.getByRole("button", { name: "Back to chat" }).click();
      const controls = await boxes(page, {
        composer: "form.composer",
        send: '[data-testid="send-button"]',
        model: '[data-testid="model-select"]',
      });
      const toasts = await page.locator('[data-testid="error-message"]').evaluateAll((nodes) =>
        nodes.map((n) => {
          const r = n.getBoundingClientRect();
          return { x: r.x, y: r.y, width: r.width, height: r.height };
        }),
      );
      assert.equal(toasts.length, 3, `${width}: at most three toasts, the oldest dropped`);
      for (const t of toasts) {
        assert.ok(inside(t, width, height), `${width}: a toast ${JSON.stringify(t)} is off-screen`);
        for (const [name, box] of Object.entries(controls)) {
          assert.ok(box && !overlap(t, box), `${width}: a toast ${JSON.stringify(t)} covers the ${name} ${JSON.stringify(box)}`);
        }
      }
      await page.screenshot({ path: path.join(outDir, `browser-toasts-${width}.png`) });
      // On the Models screen the toasts sit above the import form, not over it.
      if (width <= 860) await page.locator('[data-testid="sidebar-toggle"]').click();
      await page.locator('[data-testid="models-button"]').click();
      const field = await page.locator('[data-testid="import-path"]').boundingBox();
      const shown = await page.locator('[data-testid="error-message"]').evaluateAll((nodes) =>
        nodes.map((n) => n.getBoundingClientRect().toJSON()),
      );
      for (const t of shown) assert.ok(!overlap(t, field), `${width}: a toast covers the import field`);
    } finally {
      await page.close();
    }
  }
});

test("offline: the welcome card and the hub search say so in plain words and offer Import; dismissed toasts stay gone", async () => {
  // Nothing listens on the discard port: every hub request fails to connect, as offline.
  const root = mkdtempSync(path.join(tmpdir(), "cake-offline-"));
  const offline = await startCake({
    CAKE_DATA_DIR: path.join(root, "data"),
    HF_HUB_CACHE: path.join(root, "hf"),
    HF_ENDPOINT: "http://127.0.0.1:9",
    XDG_DATA_DIRS: path.join(root, "no-packaged-models"),
  });
  const plain = "No internet connection: Cake can't reach Hugging Face. Import a file you have instead.";
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(30_000);
    await page.goto(offline.baseUrl + "/");
    await page.locator('[data-testid="starter-download"]').click();
    const failure = page.locator('[data-testid="starter-failure"]');
    await failure.waitFor();
    assert.match(await failure.innerText(), /^No internet connection: Cake can't reach Hugging Face\. Import a file you have instead\./);
    const toast = page.locator('[data-testid="error-message"]');
    assert.equal(await toast.locator('[data-testid="notice-message"]').innerText(), plain);
    // The technical text is there, folded, without the URL in the message.
    assert.equal(await toast.locator('[data-testid="notice-detail"]').isVisible(), false);
    await toast.locator("summary", { hasText: "Details" }).click();
    assert.match(await toast.locator('[data-testid="notice-detail"]').innerText(), /cannot reach the hub/);
    await page.screenshot({ path: path.join(outDir, "browser-offline-welcome.png") });
    // The way out: the import field of the Models screen.
    await failure.locator('[data-testid="failure-action"]').click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("data-testid") === "import-path");

    // The hub search says the same; dismissed, the toasts stay gone.
    await toast.locator('[data-testid="notice-dismiss"]').click();
    await toast.waitFor({ state: "detached" });
    await page.locator('[data-testid="hub-query"]').fill("llama");
    await page.locator('[data-testid="hub-search"]').click();
    await toast.locator('[data-testid="notice-message"]', { hasText: plain }).waitFor();
    assert.doesNotMatch(await toast.locator('[data-testid="notice-message"]').innerText(), /https?:|Dns|\?/);
    await page.screenshot({ path: path.join(outDir, "browser-offline-search.png") });
    await toast.locator('[data-testid="notice-dismiss"]').click();
    await toast.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Back to chat" }).click();
    await page.locator('[data-testid="models-button"]').click();
    await page.waitForTimeout(500);
    assert.equal(await toast.count(), 0, "a dismissed toast does not come back");
    // With no speech model, the Speech screen names the three families it runs.
    await page.locator('[data-testid="speech-button"]').click();
    const families = await page.locator('[data-testid="speech-families"] li').allInnerTexts();
    assert.deepEqual(families.map((f) => f.split(" (")[0].split(":")[0]), ["VibeVoice 1.5B", "VibeVoice Realtime 0.5B", "LuxTTS"]);
    await page.close();
  } finally {
    offline.server.kill();
  }
});

test("first run with an empty library: the welcome card downloads a model with progress, then it chats", async () => {
  // A hub-shaped server on loopback serves the tiny Llama as the starter repo.
  const hub = await startLocalHub(path.join(here, "../fixtures/tiny/llama_tied"), { chunkPauseMs: 40 });
  const root = mkdtempSync(path.join(tmpdir(), "cake-first-run-"));
  const fresh = await startCake({
    CAKE_DATA_DIR: path.join(root, "data"),
    HF_HUB_CACHE: path.join(root, "hf"),
    HF_ENDPOINT: hub.endpoint,
    XDG_DATA_DIRS: path.join(root, "no-packaged-models"),
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(fresh.baseUrl + "/");
    const card = page.locator('[data-testid="starter-card"]');
    await card.waitFor();
    assert.equal(await page.locator('[data-testid="starter-load-default"]').count(), 0, "no default model to offer");
    await page.screenshot({ path: path.join(outDir, "browser-first-run-welcome.png") });
    await page.locator('[data-testid="starter-download"]').click();

    const progress = page.locator('[data-testid="download-progress"]');
    await progress.waitFor();
    const seen = new Set();
    const deadline = Date.now() + 60_000;
    while ((await progress.count()) > 0 && Date.now() < deadline) {
      seen.add(await progress.innerText().catch(() => ""));
      await page.waitForTimeout(30);
    }
    const counts = [...seen].filter((t) => / of /.test(t));
    assert.ok(counts.length >= 2, `progress counted bytes as they came: ${[...seen].join(" | ")}`);
    await card.waitFor({ state: "detached" });
    assert.ok(hub.requests.includes("/api/models/HuggingFaceTB/SmolLM2-135M-Instruct/revision/main"), hub.requests.join(" "));

    // The downloaded model is loaded and chats, with no further click.
    const loaded = await page.evaluate(async () => (await (await fetch("/app/list_models", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()).loaded);
    assert.equal(loaded, "hf:HuggingFaceTB/SmolLM2-135M-Instruct");
    // The chat screen knows it too before a message is sent.
    await page.waitForFunction(() =>
      document.querySelector('[data-testid="model-select"]')?.selectedOptions[0]?.textContent.includes("loaded"),
    );
    await send(page, "Hello!");
    const reply = await watchReply(page).catch(async (error) => {
      const shown = await page.locator('[data-testid="error-message"]').allInnerTexts();
      throw new Error(`${error.message}\nerrors on screen: ${JSON.stringify(shown)}`);
    });
    assert.ok(reply.lengths.at(-1) > 0, "the downloaded model answers");
    await page.screenshot({ path: path.join(outDir, "browser-first-run.png") });
    await page.close();
  } finally {
    fresh.server.kill();
    await hub.close();
  }
});

test("a long prompt shows reading progress, and an over-long conversation offers to drop its oldest turns", async () => {
  const page = await browser.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  const settings = async (fields) => {
    await page.locator('[data-testid="sampling-panel"] summary').click();
    for (const [id, value] of Object.entries(fields)) await page.locator(`[data-testid="${id}"]`).fill(value);
    await page.locator('[data-testid="sampling-panel"] summary').click();
  };
  await settings({ "max-tokens": "8" });

  // About 1 300 tokens: read in chunks, with progress shown until the first token.
  const long = "The quick brown fox jumps over the lazy dog near the old river bank. ".repeat(90);
  await send(page, long + "Summarise.");
  const progress = page.locator('[data-testid="prompt-progress"]');
  await progress.waitFor({ timeout: 30_000 });
  assert.match(await progress.innerText(), /Reading the prompt: [\d,]+ of 1,[\d]{3} tokens/);
  await page.screenshot({ path: path.join(outDir, "browser-prompt-progress.png") });
  await page.locator('[data-testid="reply-stats"]').last().waitFor({ timeout: 120_000 });
  assert.equal(await progress.count(), 0, "the progress gives way to the reply");
  // The pasted text shows folded to its start, and unfolds whole.
  const folded = page.locator('[data-testid="folded-message"]');
  assert.ok((await folded.innerText()).length < 1400, "a long message is folded");
  await folded.locator('[data-testid="unfold-message"]').click();
  assert.equal(await folded.count(), 0);
  const user = page.locator('[data-testid="message"][data-role="user"]').last();
  assert.ok((await user.innerText()).includes(long.trim()), "unfolded, it is all there");

  // A context of 600 tokens cannot hold that exchange: the next message
  // gets an explanation in the chat, not a toast, and the offer works.
  await settings({ "context-length": "600" });
  await send(page, "And what about a cat?");
  const overflow = page.locator('[data-testid="context-overflow"]');
  await overflow.waitFor();
  assert.match(await overflow.innerText(), /context length is 600/);
  assert.equal(await page.locator('[data-testid="error-message"]').count(), 0, "no toast for an over-long prompt");
  await page.screenshot({ path: path.join(outDir, "browser-context-overflow.png") });
  await page.locator('[data-testid="drop-oldest"]').click();
  await page.locator('[data-testid="reply-stats"]').nth(1).waitFor({ timeout: 120_000 });
  assert.equal(await overflow.count(), 0);
  assert.match(await page.locator('[data-testid="dropped-note"]').innerText(), /^2 oldest messages not read$/);

  // A last message longer than the context on its own: said plainly, with no offer.
  await send(page, long);
  await overflow.waitFor();
  assert.match(await overflow.innerText(), /last message alone does not fit/);
  assert.equal(await page.locator('[data-testid="drop-oldest"]').count(), 0);
  // The same as the first message of a new conversation: no offer that cannot help.
  await page.locator('[data-testid="new-conversation"]').click();
  await send(page, long);
  await overflow.waitFor();
  assert.match(await overflow.innerText(), /last message alone \(with the system prompt\) has \d+ tokens/);
  assert.equal(await page.locator('[data-testid="drop-oldest"]').count(), 0);
  await page.close();
});

test("the Models screen searches the hub, lists a repository's GGUF files and downloads the one picked", async () => {
  const moe = path.join(here, "../fixtures/tiny/qwen3_moe_sparse");
  const ggufFiles = ["model-bf16.gguf", "model-f32.gguf", "model-q8_0.gguf"].map((name) => path.join(moe, name));
  const hub = await startLocalHub(path.join(here, "../fixtures/tiny/llama_tied"), {
    chunkPauseMs: 60,
    ggufRepos: { "tiny-org/Tiny-MoE-GGUF": ggufFiles, "tiny-org/Tiny-Other-GGUF": [ggufFiles[2]] },
  });
  const root = mkdtempSync(path.join(tmpdir(), "cake-hub-search-"));
  const app = await startCake({ CAKE_DATA_DIR: path.join(root, "data"), HF_HUB_CACHE: path.join(root, "hf"), HF_ENDPOINT: hub.endpoint });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(app.baseUrl + "/");
    await page.locator('[data-testid="models-button"]').click();
    await page.locator('[data-testid="hub-query"]').fill("moe");
    await page.locator('[data-testid="hub-search"]').click();
    const repos = page.locator('[data-testid="hub-repo"]');
    await repos.first().waitFor();
    assert.deepEqual(await repos.allInnerTexts(), ["tiny-org/Tiny-MoE-GGUF\n4,321 downloads"]);
    await repos.first().click();
    const files = page.locator('[data-testid="hub-file"]');
    await files.first().waitFor();
    const rows = (await files.allInnerTexts()).map((text) => text.replace(/\s+/g, " ").trim());
    assert.deepEqual(rows, [
      "model-bf16.gguf BF16 122 KB Download",
      "model-f32.gguf F32 235 KB Download",
      "model-q8_0.gguf Q8_0 77.9 KB Download",
    ]);
    await page.screenshot({ path: path.join(outDir, "browser-hub-search.png") });

    await files.nth(2).locator('[data-testid="hub-file-download"]').click();
    await page.locator('[data-testid="download-progress"]').waitFor();
    const row = page.locator('[data-testid="model-row"][data-model-id="hf:tiny-org/Tiny-MoE-GGUF/model-q8_0.gguf"]');
    await row.waitFor({ timeout: 60_000 });
    await page.locator('[data-testid="download-progress"]').waitFor({ state: "detached" });
    assert.match(await row.innerText(), /model-q8_0/);
    assert.equal(await files.nth(2).locator('[data-testid="hub-file-in-library"]').innerText(), "In library");
    assert.ok(hub.requests.some((p) => p.startsWith("/cdn/")), "the file came through the hub's storage redirect");
    await page.screenshot({ path: path.join(outDir, "browser-hub-downloaded.png") });

    // A search that finds nothing says so.
    await page.locator('[data-testid="hub-query"]').fill("no such model");
    await page.locator('[data-testid="hub-search"]').click();
    await page.locator('[data-testid="hub-no-results"]').waitFor();
    await page.close();
  } finally {
    app.server.kill();
    await hub.close();
  }
});

test("conversations are renamed, searched and exported, and keep their names across a restart", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "cake-library-"));
  mkdirSync(path.join(root, "data", "models"), { recursive: true });
  symlinkSync(defaultModel(), path.join(root, "data", "models", path.basename(defaultModel())));
  const env = { CAKE_DATA_DIR: path.join(root, "data"), HF_HUB_CACHE: path.join(root, "hf") };
  let app = await startCake(env);
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(app.baseUrl + "/");
    await page.locator('[data-testid="model-select"]').waitFor();
    // Two conversations that open with the same words, as people's often do
    // (the first names a baker no reply about rye bread would bring up).
    for (const text of ["Tell me about sourdough bread, Zebulon.", "Tell me about rye bread."]) {
      await page.locator('[data-testid="new-conversation"]').click();
      await page.locator('[data-testid="model-select"]').selectOption("default");
      await page.locator('[data-testid="sampling-panel"] summary').click();
      await page.locator('[data-testid="max-tokens"]').fill("12");
      await page.locator('[data-testid="sampling-panel"] summary').click();
      await send(page, text);
      await watchReply(page);
    }

    // Rename the open one; Escape abandons a second rename.
    await page.locator('[data-testid="rename-conversation"]').click();
    await page.locator('[data-testid="title-input"]').fill("  Rye   notes ");
    await page.locator('[data-testid="title-input"]').press("Enter");
    await page.locator('[data-testid="chat-title"]', { hasText: "Rye notes" }).waitFor();
    await page.locator('[data-testid="conversation-item"]', { hasText: "Rye notes" }).waitFor();
    await page.locator('[data-testid="rename-conversation"]').click();
    await page.locator('[data-testid="title-input"]').fill("Not this");
    await page.locator('[data-testid="title-input"]').press("Escape");
    assert.equal(await page.locator('[data-testid="chat-title"]').innerText(), "Rye notes");

    // Search reads messages, ignoring case; Escape brings the list back.
    const search = page.locator('[data-testid="conversation-search"]');
    await search.fill("ZEBULON");
    const results = page.locator('[data-testid="search-result"]');
    await results.first().waitFor();
    assert.equal(await results.count(), 1);
    assert.match(await results.first().innerText(), /sourdough bread, Zebulon/);
    // Its title, longer than the sidebar is wide, is cut with an ellipsis on one line.
    const title = await results.first().locator(".conversation-title").evaluate((el) => ({
      cut: el.scrollWidth > el.clientWidth,
      inside: el.getBoundingClientRect().right <= el.closest("button").getBoundingClientRect().right + 0.5,
      oneLine: el.getClientRects().length === 1 && getComputedStyle(el).whiteSpace === "nowrap",
      ellipsis: getComputedStyle(el).textOverflow,
    }));
    assert.deepEqual(title, { cut: true, inside: true, oneLine: true, ellipsis: "ellipsis" });
    await search.fill("no conversation says this");
    await page.locator('[data-testid="search-empty"]').waitFor();
    await search.fill("rye");
    await page.locator('[data-testid="search-result"]', { hasText: "Rye notes" }).waitFor();
    await page.screenshot({ path: path.join(outDir, "browser-search.png") });
    await search.press("Escape");
    assert.equal(await page.locator('[data-testid="conversation-item"]').count(), 2);

    // Export the renamed conversation as Markdown and as JSON.
    const exported = async (format) => {
      await page.locator('[data-testid="export-menu"] summary').click();
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.locator(`[data-testid="export-${format}"]`).click(),
      ]);
      return { name: download.suggestedFilename(), text: readFileSync(await download.path(), "utf8") };
    };
    const markdown = await exported("markdown");
    assert.equal(markdown.name, "Rye notes.md");
    assert.match(markdown.text, /^# Rye notes\n/);
    assert.match(markdown.text, /\n## You\n\nTell me about rye bread\.\n\n## Assistant\n\n\S/);
    const json = await exported("json");
    assert.equal(json.name, "Rye notes.json");
    const saved = JSON.parse(json.text);
    assert.equal(saved.title, "Rye notes");
    assert.equal(saved.title_set, true);
    assert.deepEqual(saved.messages.map((m) => m.role), ["user", "assistant"]);
    await page.screenshot({ path: path.join(outDir, "browser-renamed.png") });
    await page.close();

    // A restart keeps the name, and search still finds it.
    app.server.kill();
    await new Promise((resolve) => app.server.once("exit", resolve));
    app = await startCake(env);
    const again = await browser.newPage();
    again.setDefaultTimeout(60_000);
    await again.goto(app.baseUrl + "/");
    await again.locator('[data-testid="conversation-item"]', { hasText: "Rye notes" }).waitFor();
    await again.locator('[data-testid="conversation-search"]').fill("rye bread");
    await again.locator('[data-testid="search-result"]', { hasText: "Rye notes" }).waitFor();
    await again.close();
  } finally {
    app.server.kill();
  }
});

test("any message is copied, any reply made again with its versions kept, the theme chosen, and keys drive the chat", async () => {
  const context = await browser.newContext({ permissions: ["clipboard-read", "clipboard-write"], colorScheme: "light" });
  const page = await context.newPage();
  page.setDefaultTimeout(60_000);
  await openApp(page);
  const messages = page.locator('[data-testid="message"]');
  const bodyColour = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);

  // Two turns in a new conversation.
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await page.locator('[data-testid="max-tokens"]').fill("12");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await send(page, "Say hello.");
  await watchReply(page);
  await send(page, "Now say goodbye.");
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
  assert.equal(await messages.count(), 4);

  // Copy: a user message exactly, and a reply.
  const clipboard = () => page.evaluate(() => navigator.clipboard.readText());
  await messages.nth(0).hover();
  await messages.nth(0).locator('[data-testid="copy-message"]').click();
  await messages.nth(0).locator('[data-testid="copy-message"]', { hasText: "Copied" }).waitFor();
  assert.equal(await clipboard(), "Say hello.");
  await messages.nth(1).hover();
  await messages.nth(1).locator('[data-testid="copy-message"]').click();
  const copiedReply = await clipboard();
  assert.ok(copiedReply.trim().length > 0, "the reply was copied");
  assert.notEqual(copiedReply, "Say hello.");

  // Regenerate the first reply: the conversation goes on from a new version,
  // and the old one (with the turn after it) can be shown again.
  await messages.nth(1).hover();
  await messages.nth(1).locator('[data-testid="regenerate-reply"]').click();
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
  assert.equal(await messages.count(), 2);
  const label = messages.nth(1).locator('[data-testid="version-label"]');
  assert.equal(await label.innerText(), "2 / 2");
  await messages.nth(1).locator('[data-testid="previous-version"]').click();
  await page.locator('[data-testid="message"]', { hasText: "Now say goodbye." }).waitFor();
  assert.equal(await messages.count(), 4);
  assert.equal(await label.innerText(), "1 / 2");
  await messages.nth(1).locator('[data-testid="next-version"]').click();
  await page.locator('[data-testid="message"]', { hasText: "Now say goodbye." }).waitFor({ state: "detached" });
  await page.screenshot({ path: path.join(outDir, "browser-versions.png") });
  // Saved: a reload shows the same version, the other still there.
  await page.reload();
  await page.locator('[data-testid="version-label"]', { hasText: "2 / 2" }).waitFor();
  assert.equal(await messages.count(), 2);

  // Keys: search, the message box, a new conversation, back to this one, the list of shortcuts.
  const focusOn = (testid) =>
    page.waitForFunction((id) => document.activeElement?.getAttribute("data-testid") === id, testid, { timeout: 5_000 });
  await page.keyboard.press("Control+K");
  await focusOn("conversation-search");
  await page.keyboard.press("Shift+Escape");
  await focusOn("chat-input");
  const current = () => page.evaluate(() => document.querySelector(".conversation-item.current")?.getAttribute("data-conversation-id"));
  const ours = await current();
  const listed = await page.locator('[data-testid="conversation-item"]').count();
  await page.keyboard.press("Control+Shift+O");
  await page.locator(".empty-chat").waitFor();
  assert.equal(await page.locator('[data-testid="conversation-item"]').count(), listed + 1);
  assert.notEqual(await current(), ours);
  // The new one is listed first, and ours, the last one written to, next.
  await page.keyboard.press("Alt+ArrowDown");
  await page.waitForFunction((id) => document.querySelector(".conversation-item.current")?.getAttribute("data-conversation-id") === id, ours);
  await page.locator('[data-testid="version-label"]', { hasText: "2 / 2" }).waitFor();
  await page.keyboard.press("Control+/");
  await page.locator('[data-testid="shortcuts-dialog"]', { hasText: "Ctrl+Shift+O" }).waitFor();
  await page.screenshot({ path: path.join(outDir, "browser-shortcuts.png") });
  await page.keyboard.press("Escape");
  await page.locator('[data-testid="shortcuts-dialog"]').waitFor({ state: "detached" });

  // The theme: the system's (light here), then light, dark, kept across a reload, and back.
  const theme = page.locator('[data-testid="theme-button"]');
  assert.equal(await theme.getAttribute("data-theme-choice"), "system");
  assert.equal(await bodyColour(), "rgb(255, 255, 255)");
  await theme.click();
  assert.equal(await theme.getAttribute("data-theme-choice"), "light");
  assert.equal(await bodyColour(), "rgb(255, 255, 255)");
  await theme.click();
  assert.equal(await theme.getAttribute("data-theme-choice"), "dark");
  assert.notEqual(await bodyColour(), "rgb(255, 255, 255)");
  await page.waitForTimeout(300); // the buttons' colour transitions end
  await page.screenshot({ path: path.join(outDir, "browser-dark-chosen.png") });
  await page.reload();
  await page.locator('[data-testid="theme-button"][data-theme-choice="dark"]').waitFor();
  assert.notEqual(await bodyColour(), "rgb(255, 255, 255)");
  await theme.click();
  assert.equal(await theme.getAttribute("data-theme-choice"), "system");
  assert.equal(await bodyColour(), "rgb(255, 255, 255)");
  await context.close();
});

test("editing turn 1 of a 3-turn chat keeps the old branch: switching back restores every later turn, after a reload too", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(60_000);
  await openApp(page);
  const messages = page.locator('[data-testid="message"]');
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await page.locator('[data-testid="max-tokens"]').fill("8");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  for (const question of ["Name a cake.", "Name a bread.", "Name a pie."]) {
    await send(page, question);
    await watchReply(page);
    await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
  }
  assert.equal(await messages.count(), 6);
  const bodies = () => page.locator('[data-testid="message"] .message-body').allInnerTexts();
  const before = await bodies();

  await messages.nth(0).hover();
  await messages.nth(0).locator('[data-testid="edit-button"]').click();
  await page.locator('[data-testid="edit-input"]').fill("Name a biscuit.");
  await page.locator('[data-testid="edit-save"]').click();
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
  assert.equal(await messages.count(), 2);
  const label = messages.nth(0).locator('[data-testid="version-label"]');
  assert.equal(await label.innerText(), "2 / 2");
  assert.match(await messages.nth(0).innerText(), /Name a biscuit\./);

  await messages.nth(0).locator('[data-testid="previous-version"]').click();
  await page.locator('[data-testid="message"]', { hasText: "Name a pie." }).waitFor();
  assert.deepEqual(await bodies(), before, "the old branch comes back whole");
  await page.screenshot({ path: path.join(outDir, "browser-edit-branch.png") });
  await page.reload();
  await page.locator('[data-testid="version-label"]', { hasText: "1 / 2" }).waitFor();
  assert.deepEqual(await bodies(), before, "a reload keeps the old branch shown");
  await messages.nth(0).locator('[data-testid="next-version"]').click();
  await page.locator('[data-testid="message"]', { hasText: "Name a pie." }).waitFor({ state: "detached" });
  assert.match(await messages.nth(0).innerText(), /Name a biscuit\./);
  await page.close();
});

/** Calls an app command from the page (with its session), as the UI does; resolves to the JSON answer. */
async function appCall(page, command, args = {}) {
  return page.evaluate(
    async ({ command, args }) => {
      const response = await fetch(`/app/${command}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(args),
      });
      if (!response.ok) throw new Error(`${command}: HTTP ${response.status} ${await response.text()}`);
      return response.json();
    },
    { command, args },
  );
}

test("a picture dropped into the composer is read by a vision model, kept across a reload, and deleted with its conversation", async () => {
  const model = path.resolve(here, "../fixtures/tiny/gemma3_vision");
  const chat = JSON.parse(readFileSync(path.join(model, "reference.json"), "utf8")).chat;
  const picture = readFileSync(path.join(model, chat.picture));
  const pictureId = createHash("sha256").update(picture).digest("hex");
  // What `cake run` makes of the same picture and question (greedy, 8 tokens).
  const run = JSON.parse(
    execFileSync(cakeBin, ["run", "--model", model, "--chat", "--image", path.join(model, chat.picture), "--prompt",
      chat.question, "--temperature", "0", "--max-tokens", "8", "--json"], { encoding: "utf8" }),
  );
  assert.deepEqual(run.prompt_tokens, chat.ids, "cake run reads the processor's prompt");

  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(60_000);
  const chatRequests = [];
  page.on("request", (request) => {
    if (request.url().endsWith("/app/chat")) chatRequests.push(JSON.parse(request.postData()));
  });
  await openApp(page);
  await importModel(page, model);

  // A text-only model says so at once; a file that is not a picture is refused naming it.
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption("default");
  const composer = '[data-testid="composer"]';
  await dropFiles(page, composer, [{ name: "photo.png", bytes: picture, type: "image/png" }]);
  await page.locator('[data-testid="error-message"]', { hasText: "reads text only" }).waitFor();
  assert.equal(await page.locator(`${composer} [data-testid="composer-picture"]`).count(), 0);

  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption(`file:${model}`);
  await page.locator('[data-testid="sampling-panel"] summary').click();
  // Greedy, as `cake run` above (the app's repeat penalty would steer a repetitive reply).
  await page.locator('[data-testid="sampling-temperature"]').fill("0");
  await page.locator('[data-testid="sampling-repeat_penalty"]').fill("1");
  await page.locator('[data-testid="max-tokens"]').fill("8");
  await page.locator('[data-testid="sampling-panel"] summary').click();
  await dropFiles(page, composer, [{ name: "notes.txt", bytes: Buffer.from("shopping list"), type: "text/plain" }]);
  await page.locator('[data-testid="error-message"]', { hasText: "notes.txt" }).waitFor();
  await dropFiles(page, composer, [{ name: "photo.png", bytes: picture, type: "image/png" }]);
  const attached = page.locator(`${composer} [data-testid="picture-thumbnail"]`);
  await attached.waitFor();
  assert.equal(await attached.getAttribute("data-picture-id"), pictureId, "kept under its SHA-256");
  await page.screenshot({ path: path.join(outDir, "browser-picture-attached.png") });
  await send(page, chat.question);
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });

  const asked = chatRequests.at(-1);
  assert.deepEqual(asked.messages.at(-1), { role: "user", content: chat.question, pictures: [pictureId] });
  const reply = page.locator('[data-testid="message"][data-role="assistant"]').last();
  assert.equal(await page.locator(`${composer} [data-testid="composer-picture"]`).count(), 0, "sent pictures leave the composer");
  const conversationId = (await appCall(page, "list_conversations")).conversations[0].id;
  const stored = await appCall(page, "get_conversation", { id: conversationId });
  assert.equal(stored.messages[1].stats.prompt_tokens, chat.ids.length, "the prompt held the picture's tokens");
  assert.equal(stored.messages[1].content, run.text, "the reply read the picture as cake run does");

  await page.reload();
  const shown = page.locator('[data-testid="message"][data-role="user"] [data-testid="picture-thumbnail"]');
  await shown.waitFor();
  assert.ok(await shown.evaluate((img) => img.complete && img.naturalWidth > 0), "the thumbnail is drawn after a reload");
  await page.screenshot({ path: path.join(outDir, "browser-picture-message.png") });

  // Another conversation about the same picture keeps one file; it goes with the last conversation showing it.
  await page.locator('[data-testid="new-conversation"]').click();
  await page.locator('[data-testid="model-select"]').selectOption(`file:${model}`);
  await dropFiles(page, composer, [{ name: "again.png", bytes: picture, type: "image/png" }]);
  await page.locator(`${composer} [data-testid="picture-thumbnail"]`).waitFor();
  await send(page, "And now?");
  await watchReply(page);
  await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
  const kept = path.join(workDir, "data", "pictures", pictureId);
  assert.ok(existsSync(kept), kept);
  const secondId = (await appCall(page, "list_conversations")).conversations[0].id; // newest first
  assert.notEqual(secondId, conversationId);
  await appCall(page, "delete_conversation", { id: conversationId });
  assert.ok(existsSync(kept), "kept while another conversation shows it");
  await appCall(page, "delete_conversation", { id: secondId });
  assert.ok(!existsSync(kept), "deleted with the last conversation showing it");
  await page.close();
});

/** The boxes of `selectors` on the page (null where none is shown). */
async function boxes(page, selectors) {
  return page.evaluate((selectors) => {
    const out = {};
    for (const [name, selector] of Object.entries(selectors)) {
      const el = [...document.querySelectorAll(selector)].find((e) => e.checkVisibility({ visibilityProperty: true }));
      const r = el?.getBoundingClientRect();
      out[name] = r ? { x: r.x, y: r.y, width: r.width, height: r.height } : null;
    }
    return out;
  }, selectors);
}

const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const inside = (box, width, height) => box.x >= 0 && box.y >= 0 && box.x + box.width <= width + 1 && box.y + box.height <= height + 1;

test("every screen at 360, 768, 1280 and 1920 px, light and dark, fits its window; the sidebar folds away", async () => {
  const screens = path.join(outDir, "screens");
  mkdirSync(screens, { recursive: true });
  const views = [
    ["chat", null],
    ["models", "models-button"],
    ["speech", "speech-button"],
    ["cluster", "cluster-button"],
  ];
  for (const colorScheme of ["light", "dark"]) {
    for (const [width, height] of [[360, 740], [768, 1024], [1280, 800], [1920, 1080]]) {
      const narrow = width <= 860;
      const page = await browser.newPage({ viewport: { width, height }, colorScheme });
      page.setDefaultTimeout(60_000);
      await openApp(page);
      const toggle = page.locator('[data-testid="sidebar-toggle"]');
      const sidebarShown = async () => {
        const box = (await boxes(page, { sidebar: "#sidebar" })).sidebar;
        return box !== null && box.x >= 0 && box.width > 0;
      };
      const openDrawer = async () => {
        if (!narrow || (await page.locator(".app.drawer-open").count())) return;
        await toggle.click();
        await page.locator(".app.drawer-open").waitFor();
        await page.waitForFunction(() => document.querySelector("#sidebar").getBoundingClientRect().x >= 0);
      };
      // Narrow: the sidebar waits in a drawer; the chat has the whole width.
      await page.waitForTimeout(300);
      assert.equal(await sidebarShown(), !narrow, `${width}: the sidebar shows only in a wide window`);
      // A conversation with a reply, so the chat screen shows one.
      await openDrawer();
      await page.locator('[data-testid="new-conversation"]').click();
      await page.locator(".app.drawer-open").waitFor({ state: "detached" });
      await page.locator('[data-testid="model-select"]').selectOption("default");
      await page.locator('[data-testid="sampling-panel"] summary').click();
      await page.locator('[data-testid="max-tokens"]').fill("24");
      await page.locator('[data-testid="sampling-panel"] summary').click();
      await send(page, "Name three kinds of cake, in a table.");
      await page.locator('[data-testid="reply-stats"]').last().waitFor({ timeout: 120_000 });
      await page.locator('[data-testid="stop-button"]').waitFor({ state: "detached" });
      const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      assert.equal(background === "rgb(255, 255, 255)", colorScheme === "light", `${colorScheme} background ${background}`);
      // The composer, Send, the model menu and the sidebar button: all in the window, none over another.
      const controls = await boxes(page, {
        composer: "form.composer textarea",
        send: '[data-testid="send-button"]',
        model: '[data-testid="model-select"]',
        toggle: '[data-testid="sidebar-toggle"]',
        title: '[data-testid="chat-title"]',
      });
      for (const [name, box] of Object.entries(controls)) {
        assert.ok(box && inside(box, width, height), `${width}: ${name} ${JSON.stringify(box)} is not in the window`);
        assert.ok(box.width >= 24, `${width}: ${name} is squeezed to ${box.width} px`);
      }
      const names = Object.keys(controls);
      for (const [i, a] of names.entries()) {
        for (const b of names.slice(i + 1)) {
          assert.ok(!overlap(controls[a], controls[b]), `${width}: ${a} and ${b} overlap`);
        }
      }
      assert.ok(controls.composer.width >= Math.min(width * 0.55, 520), `${width}: the message box is ${controls.composer.width} px`);
      assert.ok(controls.title.width >= 60, `${width}: the title is ${controls.title.width} px`);
      for (const [view, button] of views) {
        if (button) {
          await openDrawer();
          await page.locator(`[data-testid="${button}"]`).click();
          // Choosing a screen closes the drawer.
          if (narrow) await page.locator(".app.drawer-open").waitFor({ state: "detached" });
        }
        await page.waitForTimeout(300);
        // Nothing wider than the window, and no element cut at its right edge.
        const overflow = await page.evaluate(() => {
          const edge = window.innerWidth + 1;
          // Clipped by a scrolling or clipping box that itself fits: not cut.
          const clipped = (el) => {
            for (let up = el.parentElement; up; up = up.parentElement) {
              if (getComputedStyle(up).overflowX !== "visible") return up.getBoundingClientRect().right <= edge;
            }
            return false;
          };
          const wide = [...document.querySelectorAll("main *, aside *, section *")].filter((el) => {
            const box = el.getBoundingClientRect();
            return box.width > 0 && box.right > edge && el.checkVisibility({ visibilityProperty: true }) && !clipped(el);
          });
          return {
            page: document.documentElement.scrollWidth - window.innerWidth,
            elements: wide.slice(0, 3).map((el) => `${el.tagName}.${el.className}`),
          };
        });
        assert.ok(overflow.page <= 0, `${view} ${width}×${height} ${colorScheme}: the page is ${overflow.page} px too wide`);
        assert.deepEqual(overflow.elements, [], `${view} ${width}×${height} ${colorScheme}: cut at the right edge`);
        if (view === "models") {
          const row = await boxes(page, { load: '[data-testid="model-load"]', remove: '[data-testid="model-delete"]' });
          for (const [name, box] of Object.entries(row)) assert.ok(box && inside(box, width, height), `${width}: the model's ${name} button is off-screen`);
        }
        await page.screenshot({ path: path.join(screens, `${view}-${width}x${height}-${colorScheme}.png`) });
      }
      if (narrow) {
        await openDrawer();
        await page.screenshot({ path: path.join(screens, `drawer-${width}x${height}-${colorScheme}.png`) });
        await page.locator('[data-testid="drawer-backdrop"]').click({ position: { x: width - 10, y: height / 2 } });
        await page.locator(".app.drawer-open").waitFor({ state: "detached" });
      } else {
        // Hidden on demand, remembered across a reload, and shown again.
        await toggle.click();
        await page.waitForFunction(() => !document.querySelector("#sidebar").checkVisibility());
        const main = await boxes(page, { main: "main" });
        assert.ok(main.main.x === 0 && main.main.width === width, `${width}: the screen takes the window: ${JSON.stringify(main)}`);
        await page.reload();
        await page.locator('[data-testid="model-select"], [data-testid="sidebar-toggle"]').first().waitFor();
        await page.waitForTimeout(300);
        assert.equal(await sidebarShown(), false, `${width}: the hidden sidebar stays hidden after a reload`);
        await toggle.first().click();
        await page.waitForFunction(() => document.querySelector("#sidebar").checkVisibility());
      }
      await page.close();
    }
  }
});
