// A small Markdown renderer for model replies. Model output is untrusted:
// every piece of text goes through `escapeHtml` before it reaches the
// output, tags come only from this file, and links are kept only for
// http/https URLs. Nothing in the input can produce a tag or an attribute.
//
// Supported: paragraphs (single newlines become <br>), ATX headings,
// fenced code blocks (an unclosed fence runs to the end, as while a reply
// streams), bullet and numbered lists (nested by indentation), block
// quotes, horizontal rules, tables, and inline **bold**, *italic*,
// ~~strike~~, `code`, [links](https://…), <https://…> and bare URLs.

// ---- Escaping ---------------------------------------------------------------

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Escape text for use in HTML content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** The URL if it is an absolute http(s) URL, else null. */
export function safeHref(raw: string): string | null {
  const url = raw.trim();
  if (!/^https?:\/\/[^\s]/i.test(url)) return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? url : null;
  } catch {
    return null;
  }
}

// ---- Blocks -----------------------------------------------------------------

type Align = "left" | "center" | "right" | null;

type Block =
  | { kind: "paragraph"; text: string }
  | { kind: "heading"; level: number; text: string }
  | { kind: "code"; lang: string; code: string }
  | { kind: "list"; ordered: boolean; start: number; items: Block[][] }
  | { kind: "quote"; blocks: Block[] }
  | { kind: "rule" }
  | { kind: "table"; align: Align[]; head: string[]; rows: string[][] };

const FENCE = /^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST_ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+|$)/;
const TABLE_DIVIDER = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;

const TAB_WIDTH = 4;
const isBlank = (line: string) => line.trim() === "";

/** Width of a line's leading whitespace in columns (a tab counts 4). */
function indentOf(line: string): number {
  let width = 0;
  for (const c of line) {
    if (c === " ") width++;
    else if (c === "\t") width += TAB_WIDTH;
    else break;
  }
  return width;
}

/** Remove up to `columns` columns of leading whitespace. */
function stripIndent(line: string, columns: number): string {
  let width = 0;
  let n = 0;
  while (n < line.length && width < columns && (line[n] === " " || line[n] === "\t")) {
    width += line[n] === "\t" ? TAB_WIDTH : 1;
    n++;
  }
  return line.slice(n);
}

/** Whether a line starts a block that ends a paragraph. */
function startsBlock(line: string): boolean {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || LIST_ITEM.test(line);
}

function parseBlocks(lines: string[]): Block[] {
  const blocks: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }

    const fence = FENCE.exec(line);
    if (fence) {
      const [, indent, marker, lang] = fence;
      const closing = new RegExp(`^ {0,3}${marker[0] === "`" ? "`" : "~"}{${marker.length},}[ \\t]*$`);
      const code: string[] = [];
      i++;
      while (i < lines.length && !closing.test(lines[i])) {
        code.push(stripIndent(lines[i], indent.length));
        i++;
      }
      i++; // the closing fence (or past the end: an unclosed fence runs to the end)
      blocks.push({ kind: "code", lang, code: code.join("\n") });
      continue;
    }

    const heading = HEADING.exec(line);
    if (heading) {
      blocks.push({ kind: "heading", level: heading[1].length, text: heading[2] ?? "" });
      i++;
      continue;
    }

    if (RULE.test(line)) {
      blocks.push({ kind: "rule" });
      i++;
      continue;
    }

    if (QUOTE.test(line)) {
      const quoted: string[] = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        quoted.push(lines[i].replace(QUOTE, ""));
        i++;
      }
      blocks.push({ kind: "quote", blocks: parseBlocks(quoted) });
      continue;
    }

    if (LIST_ITEM.test(line)) {
      const [list, next] = parseList(lines, i);
      blocks.push(list);
      i = next;
      continue;
    }

    if (isTableStart(lines, i)) {
      const head = splitRow(line);
      const align = splitRow(lines[i + 1]).map(alignOf);
      const rows: string[][] = [];
      i += 2;
      while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|")) {
        rows.push(splitRow(lines[i]));
        i++;
      }
      blocks.push({ kind: "table", align, head, rows });
      continue;
    }

    const paragraph: string[] = [line.trim()];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i])) {
      paragraph.push(lines[i].trim());
      i++;
    }
    blocks.push({ kind: "paragraph", text: paragraph.join("\n") });
  }
  return blocks;
}

/** Parse the list starting at `lines[start]`; returns it and the index after it. */
function parseList(lines: string[], start: number): [Block, number] {
  const first = LIST_ITEM.exec(lines[start])!;
  const baseIndent = indentOf(first[1]);
  const ordered = /\d/.test(first[2]);
  const sameKind = (m: RegExpExecArray) => /\d/.test(m[2]) === ordered && indentOf(m[1]) <= baseIndent + 1;

  const items: string[][] = [];
  let current: string[] = [];
  let contentIndent = 0;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const item = LIST_ITEM.exec(line);
    if (item && sameKind(item)) {
      if (i > start) items.push(current);
      contentIndent = indentOf(item[1]) + item[2].length + Math.min(indentOf(item[3]) || 1, 4);
      current = [line.slice(item[0].length)];
      i++;
      continue;
    }
    if (isBlank(line)) {
      // A blank line continues the list only if more of it follows.
      const next = lines.slice(i + 1).find((l) => !isBlank(l));
      const nextItem = next === undefined ? null : LIST_ITEM.exec(next);
      const continues =
        next !== undefined && (indentOf(next) > baseIndent || (nextItem !== null && sameKind(nextItem)));
      if (!continues) break;
      current.push("");
      i++;
      continue;
    }
    if (indentOf(line) > baseIndent) {
      // Indented: belongs to the current item (nested list, more paragraphs…).
      current.push(stripIndent(line, Math.min(contentIndent, indentOf(line))));
      i++;
      continue;
    }
    // Not indented: a lazy continuation of the item's text, unless a new block starts.
    if (isBlank(lines[i - 1]) || startsBlock(line)) break;
    current.push(line.trim());
    i++;
  }
  items.push(current);
  const startNumber = ordered ? parseInt(first[2], 10) : 1;
  return [{ kind: "list", ordered, start: startNumber, items: items.map(parseBlocks) }, i];
}

/** Split a table row on unescaped pipes outside code spans. */
function splitRow(line: string): string[] {
  let text = line.trim();
  if (text.startsWith("|")) text = text.slice(1);
  if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
  const cells: string[] = [];
  let cell = "";
  let inCode = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && text[i + 1] === "|") {
      cell += "|";
      i++;
    } else if (c === "`") {
      inCode = !inCode;
      cell += c;
    } else if (c === "|" && !inCode) {
      cells.push(cell.trim());
      cell = "";
    } else {
      cell += c;
    }
  }
  cells.push(cell.trim());
  return cells;
}

/** A header row with pipes, then a divider row with the same number of cells. */
function isTableStart(lines: string[], i: number): boolean {
  const divider = lines[i + 1];
  return (
    divider !== undefined &&
    lines[i].includes("|") &&
    divider.includes("|") &&
    TABLE_DIVIDER.test(divider) &&
    splitRow(lines[i]).length === splitRow(divider).length
  );
}

function alignOf(divider: string): Align {
  const left = divider.startsWith(":");
  const right = divider.endsWith(":");
  if (left && right) return "center";
  if (right) return "right";
  if (left) return "left";
  return null;
}

// ---- Inline -----------------------------------------------------------------

const ESCAPABLE = "\\`*_{}[]()#+-.!|~<>\"'";
const BARE_URL = /^https?:\/\/[^\s<>"'`]+/i;
const ANGLE_URL = /^<(https?:\/\/[^\s<>]+)>/i;

/** Length of the run of `char` starting at `at`. */
function runLength(text: string, at: number, char: string): number {
  let n = 0;
  while (text[at + n] === char) n++;
  return n;
}

/** Index of a backtick run of exactly `length` at or after `from`, or -1. */
function findCodeClose(text: string, from: number, length: number): number {
  let i = from;
  while (i < text.length) {
    if (text[i] === "`") {
      const run = runLength(text, i, "`");
      if (run === length) return i;
      i += run;
    } else {
      i++;
    }
  }
  return -1;
}

/** The index just past a code span or escape starting at `i`, or `i` itself. */
function skipOpaque(text: string, i: number): number {
  if (text[i] === "\\" && i + 1 < text.length) return i + 2;
  if (text[i] === "`") {
    const run = runLength(text, i, "`");
    const close = findCodeClose(text, i + run, run);
    return close === -1 ? i + run : close + run;
  }
  return i;
}

const isSpace = (c: string | undefined) => c === undefined || /\s/.test(c);
const isWordChar = (c: string | undefined) => c !== undefined && /[\p{L}\p{N}]/u.test(c);

interface InlineMatch {
  html: string;
  end: number;
}

/** `*em*`, `**strong**`, `***both***`, `_em_`, `__strong__`, `~~del~~` at `at`. */
function matchEmphasis(text: string, at: number): InlineMatch | null {
  const char = text[at];
  const run = Math.min(runLength(text, at, char), 3);
  if (char === "~" && run !== 2) return null;
  const contentStart = at + run;
  if (isSpace(text[contentStart])) return null;
  if (char === "_" && isWordChar(text[at - 1])) return null;

  let i = contentStart;
  while (i < text.length) {
    const skipped = skipOpaque(text, i);
    if (skipped !== i) {
      i = skipped;
      continue;
    }
    if (text[i] === char) {
      const closeRun = runLength(text, i, char);
      const closes =
        closeRun === run && i > contentStart && !isSpace(text[i - 1]) && !(char === "_" && isWordChar(text[i + run]));
      if (closes) {
        const inner = renderInline(text.slice(contentStart, i));
        const html =
          char === "~"
            ? `<del>${inner}</del>`
            : run === 1
              ? `<em>${inner}</em>`
              : run === 2
                ? `<strong>${inner}</strong>`
                : `<strong><em>${inner}</em></strong>`;
        return { html, end: i + run };
      }
      i += closeRun;
      continue;
    }
    i++;
  }
  return null;
}

/** `[label](url)` at `at`. Unsafe URLs keep the label as plain text. */
function matchLink(text: string, at: number): InlineMatch | null {
  let depth = 0;
  let i = at;
  let labelEnd = -1;
  while (i < text.length) {
    const skipped = skipOpaque(text, i);
    if (skipped !== i) {
      i = skipped;
      continue;
    }
    if (text[i] === "[") depth++;
    if (text[i] === "]" && --depth === 0) {
      labelEnd = i;
      break;
    }
    i++;
  }
  if (labelEnd === -1 || text[labelEnd + 1] !== "(") return null;

  let parens = 0;
  let destEnd = -1;
  for (let j = labelEnd + 1; j < text.length; j++) {
    if (text[j] === "\\") {
      j++;
      continue;
    }
    if (text[j] === "(") parens++;
    if (text[j] === ")" && --parens === 0) {
      destEnd = j;
      break;
    }
  }
  if (destEnd === -1) return null;

  let destination = text.slice(labelEnd + 2, destEnd).trim();
  const angled = /^<([^>]*)>/.exec(destination);
  destination = angled ? angled[1] : destination.split(/\s+/)[0];
  const label = renderInline(text.slice(at + 1, labelEnd));
  const href = safeHref(destination);
  return { html: href === null ? label : anchor(href, label), end: destEnd + 1 };
}

/** A bare `https://…` URL at `at`, without trailing punctuation. */
function matchBareUrl(text: string, at: number): InlineMatch | null {
  if (isWordChar(text[at - 1])) return null;
  const found = BARE_URL.exec(text.slice(at));
  if (!found) return null;
  let url = found[0];
  while (/[.,;:!?*_~]$/.test(url) || (url.endsWith(")") && count(url, "(") < count(url, ")"))) {
    url = url.slice(0, -1);
  }
  const href = safeHref(url);
  return href === null ? null : { html: anchor(href, escapeHtml(url)), end: at + url.length };
}

function count(text: string, char: string): number {
  return text.split(char).length - 1;
}

function anchor(href: string, labelHtml: string): string {
  return `<a href="${escapeHtml(href)}" target="_blank" rel="noopener noreferrer">${labelHtml}</a>`;
}

/** Render inline Markdown to HTML; all text is escaped. */
function renderInline(text: string): string {
  let html = "";
  let plain = "";
  const flush = () => {
    html += escapeHtml(plain);
    plain = "";
  };
  const emit = (match: InlineMatch) => {
    flush();
    html += match.html;
    return match.end;
  };

  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && text[i + 1] === "\n") {
      flush();
      html += "<br>";
      i += 2;
    } else if (c === "\\" && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
    } else if (c === "\n") {
      flush();
      html += "<br>";
      i++;
    } else if (c === "`") {
      const run = runLength(text, i, "`");
      const close = findCodeClose(text, i + run, run);
      if (close === -1) {
        plain += "`".repeat(run);
        i += run;
      } else {
        i = emit({ html: `<code>${escapeHtml(codeSpanText(text.slice(i + run, close)))}</code>`, end: close + run });
      }
    } else {
      const match =
        c === "*" || c === "_" || c === "~"
          ? matchEmphasis(text, i)
          : c === "["
            ? matchLink(text, i)
            : c === "<"
              ? matchAngleUrl(text, i)
              : c === "h" || c === "H"
                ? matchBareUrl(text, i)
                : null;
      if (match) {
        i = emit(match);
      } else {
        // Emphasis characters that did not open anything are literal as a whole run.
        const run = c === "*" || c === "_" || c === "~" ? runLength(text, i, c) : 1;
        plain += text.slice(i, i + run);
        i += run;
      }
    }
  }
  flush();
  return html;
}

function matchAngleUrl(text: string, at: number): InlineMatch | null {
  const found = ANGLE_URL.exec(text.slice(at));
  const href = found ? safeHref(found[1]) : null;
  return found && href !== null ? { html: anchor(href, escapeHtml(found[1])), end: at + found[0].length } : null;
}

/** Code span content: line ends become spaces; one surrounding space is stripped. */
function codeSpanText(raw: string): string {
  const text = raw.replace(/\n/g, " ");
  return /^ .*[^ ].* $/.test(text) ? text.slice(1, -1) : text;
}

// ---- Output -----------------------------------------------------------------

const LANGUAGE_CLASS = /^[\w+#.-]{1,40}$/;

function renderBlock(block: Block): string {
  switch (block.kind) {
    case "paragraph":
      return `<p>${renderInline(block.text)}</p>`;
    case "heading":
      return `<h${block.level}>${renderInline(block.text)}</h${block.level}>`;
    case "rule":
      return "<hr>";
    case "quote":
      return `<blockquote>${block.blocks.map(renderBlock).join("")}</blockquote>`;
    case "code": {
      const langClass = LANGUAGE_CLASS.test(block.lang) ? ` class="language-${escapeHtml(block.lang)}"` : "";
      return (
        `<div class="code-block"><div class="code-head">` +
        `<span class="code-lang">${escapeHtml(block.lang)}</span>` +
        `<button type="button" class="copy-button" data-copy-code>Copy</button></div>` +
        `<pre><code${langClass}>${escapeHtml(block.code)}</code></pre></div>`
      );
    }
    case "list": {
      const tag = block.ordered ? "ol" : "ul";
      const start = block.ordered && block.start !== 1 ? ` start="${block.start}"` : "";
      const items = block.items.map((blocks) => `<li>${renderItem(blocks)}</li>`).join("");
      return `<${tag}${start}>${items}</${tag}>`;
    }
    case "table": {
      const cell = (tag: string, text: string, column: number) => {
        const align = block.align[column];
        return `<${tag}${align ? ` class="align-${align}"` : ""}>${renderInline(text)}</${tag}>`;
      };
      const head = `<tr>${block.head.map((text, c) => cell("th", text, c)).join("")}</tr>`;
      const rows = block.rows
        .map((row) => `<tr>${block.head.map((_, c) => cell("td", row[c] ?? "", c)).join("")}</tr>`)
        .join("");
      return `<div class="table-wrap"><table><thead>${head}</thead><tbody>${rows}</tbody></table></div>`;
    }
  }
}

/** A list item whose first block is a paragraph shows it without <p> (a tight list). */
function renderItem(blocks: Block[]): string {
  const [first, ...rest] = blocks;
  if (!first) return "";
  const lead = first.kind === "paragraph" ? renderInline(first.text) : renderBlock(first);
  return lead + rest.map(renderBlock).join("");
}

/** Render Markdown from an untrusted source to safe HTML. */
export function renderMarkdown(source: string): string {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  return parseBlocks(lines).map(renderBlock).join("");
}
