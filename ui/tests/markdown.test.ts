// Tests for the Markdown renderer: the supported syntax, and above all that
// hostile model output can never become live HTML.

import { describe, expect, it } from "vitest";
import { escapeHtml, renderMarkdown, safeHref } from "../src/lib/markdown";

const md = renderMarkdown;

describe("escaping", () => {
  it("escapes the five HTML-special characters", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });

  it("turns a script tag into text", () => {
    expect(md("<script>alert(1)</script>")).toBe("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
  });

  it("turns an img with onerror into text", () => {
    const html = md('<img src=x onerror="alert(1)">');
    expect(html).toBe("<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</p>");
    expect(html).not.toContain("<img");
  });

  it("escapes HTML inside emphasis, headings, lists, quotes and tables", () => {
    const html = md(
      "# <b>h</b>\n\n**<i>x</i>**\n\n- <svg onload=alert(1)>\n\n> <iframe>\n\n| <a> | b |\n|---|---|\n| <u> | c |",
    );
    expect(html).not.toMatch(/<(b|i|svg|iframe|a|u)[\s>]/);
    expect(html).toContain("&lt;svg onload=alert(1)&gt;");
  });

  it("escapes HTML inside code spans and code blocks", () => {
    expect(md("`<b>`")).toBe("<p><code>&lt;b&gt;</code></p>");
    const html = md("```html\n</code></pre><script>alert(1)</script>\n```");
    expect(html).toContain("&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).not.toContain("<script");
  });

  it("keeps entities literal instead of decoding them", () => {
    expect(md("&lt;script&gt; &amp;")).toBe("<p>&amp;lt;script&amp;gt; &amp;amp;</p>");
  });
});

describe("links", () => {
  it("renders http and https links with rel=noopener", () => {
    expect(md("[Cake](https://example.com/a?b=1&c=2)")).toBe(
      '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">Cake</a></p>',
    );
    expect(md("[x](http://example.com)")).toContain('href="http://example.com"');
  });

  it.each([
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "&#106;avascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "//evil.example.com",
    "/relative/path",
  ])("drops the link but keeps the label for %j", (url) => {
    const html = md(`[click me](${url})`);
    expect(html).not.toContain("<a");
    expect(html).not.toContain("href");
    expect(html).toContain("click me");
  });

  it("cannot break out of the href attribute", () => {
    const html = md('[x](https://a.example/"onmouseover="alert(1))');
    expect(html).toContain('href="https://a.example/&quot;onmouseover=&quot;alert(1)"');
    expect(html).not.toMatch(/"\s*onmouseover=/);
  });

  it("links bare and angle-bracket URLs, leaving trailing punctuation out", () => {
    expect(md("See https://example.com/x.")).toBe(
      '<p>See <a href="https://example.com/x" target="_blank" rel="noopener noreferrer">https://example.com/x</a>.</p>',
    );
    expect(md("(https://example.com/wiki/A_(b))")).toContain('href="https://example.com/wiki/A_(b)"');
    expect(md("<https://example.com>")).toContain('<a href="https://example.com"');
    expect(md("<javascript:alert(1)>")).toBe("<p>&lt;javascript:alert(1)&gt;</p>");
  });

  it("formats the label but never nests hostile markup in it", () => {
    expect(md("[**bold** <b>](https://example.com)")).toBe(
      '<p><a href="https://example.com" target="_blank" rel="noopener noreferrer"><strong>bold</strong> &lt;b&gt;</a></p>',
    );
  });
});

describe("inline formatting", () => {
  it("renders bold, italic, strike and code", () => {
    expect(md("**b** *i* __B__ _I_ ***bi*** ~~s~~ `c`")).toBe(
      "<p><strong>b</strong> <em>i</em> <strong>B</strong> <em>I</em> <strong><em>bi</em></strong> <del>s</del> <code>c</code></p>",
    );
  });

  it("nests emphasis", () => {
    expect(md("**a *b* c**")).toBe("<p><strong>a <em>b</em> c</strong></p>");
    expect(md("*a **b** c*")).toBe("<p><em>a <strong>b</strong> c</em></p>");
  });

  it("leaves lone or spaced markers and snake_case alone", () => {
    expect(md("2 * 3 * 4")).toBe("<p>2 * 3 * 4</p>");
    expect(md("call snake_case_name now")).toBe("<p>call snake_case_name now</p>");
    expect(md("**unclosed")).toBe("<p>**unclosed</p>");
    expect(md("`unclosed code")).toBe("<p>`unclosed code</p>");
  });

  it("does not look for emphasis inside code spans", () => {
    expect(md("`**not bold**`")).toBe("<p><code>**not bold**</code></p>");
    expect(md("``a ` b``")).toBe("<p><code>a ` b</code></p>");
  });

  it("honours backslash escapes", () => {
    expect(md("\\*not italic\\*")).toBe("<p>*not italic*</p>");
  });

  it("turns single newlines into line breaks", () => {
    expect(md("one\ntwo")).toBe("<p>one<br>two</p>");
    expect(md("one\n\ntwo")).toBe("<p>one</p><p>two</p>");
  });
});

describe("blocks", () => {
  it("renders headings", () => {
    expect(md("# One\n## Two ##\n###### Six")).toBe("<h1>One</h1><h2>Two</h2><h6>Six</h6>");
    expect(md("#hashtag")).toBe("<p>#hashtag</p>");
  });

  it("renders a fenced code block with language and copy button", () => {
    const html = md("```python\nprint('hi')\n\n  x = 1\n```\nafter");
    expect(html).toContain('<code class="language-python">print(&#39;hi&#39;)\n\n  x = 1</code>');
    expect(html).toContain('<button type="button" class="copy-button" data-copy-code>Copy</button>');
    expect(html).toContain("<p>after</p>");
  });

  it("runs an unclosed fence to the end, as while streaming", () => {
    const html = md("Here:\n```js\nconst a = '<b>';\n# not a heading");
    expect(html).toContain("<p>Here:</p>");
    expect(html).toContain('<code class="language-js">const a = &#39;&lt;b&gt;&#39;;\n# not a heading</code>');
    expect(html).not.toContain("<h1>");
  });

  it("refuses a hostile code block language as a class", () => {
    const html = md('```"><script>alert(1)</script>\nx\n```');
    expect(html).not.toContain("<script");
    expect(html).not.toContain('class="language-');
  });

  it("renders bullet and numbered lists, nested", () => {
    expect(md("- a\n- b\n  - c\n  - d\n- e")).toBe(
      "<ul><li>a</li><li>b<ul><li>c</li><li>d</li></ul></li><li>e</li></ul>",
    );
    expect(md("3. three\n4. four")).toBe('<ol start="3"><li>three</li><li>four</li></ol>');
    expect(md("1. a\n   * x\n2. b")).toBe("<ol><li>a<ul><li>x</li></ul></li><li>b</li></ol>");
  });

  it("keeps a list going across blank lines and ends it at a paragraph", () => {
    expect(md("- a\n\n- b\n\nafter")).toBe("<ul><li>a</li><li>b</li></ul><p>after</p>");
  });

  it("lets a code fence follow a list item", () => {
    const html = md("1. Run:\n```sh\nls\n```");
    expect(html).toContain("<ol><li>Run:</li></ol>");
    expect(html).toContain('<code class="language-sh">ls</code>');
  });

  it("renders quotes and rules", () => {
    expect(md("> quoted *text*\n> more")).toBe("<blockquote><p>quoted <em>text</em><br>more</p></blockquote>");
    expect(md("a\n\n---\n\nb")).toBe("<p>a</p><hr><p>b</p>");
  });

  it("renders tables with alignment", () => {
    expect(md("| a | b |\n|:--|--:|\n| 1 | `x|y` |")).toBe(
      '<div class="table-wrap"><table><thead><tr><th class="align-left">a</th><th class="align-right">b</th></tr></thead>' +
        '<tbody><tr><td class="align-left">1</td><td class="align-right"><code>x|y</code></td></tr></tbody></table></div>',
    );
  });

  it("handles empty and whitespace-only input", () => {
    expect(md("")).toBe("");
    expect(md("  \n\n ")).toBe("");
  });
});

describe("safety under random input", () => {
  // Allowed output: only these tags, and only these attributes on them.
  const ALLOWED_TAGS = new Set([
    "p",
    "br",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "a",
    "ul",
    "ol",
    "li",
    "blockquote",
    "hr",
    "div",
    "span",
    "button",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
  ]);
  const ALLOWED_ATTRIBUTES = new Set(["href", "target", "rel", "class", "type", "start", "data-copy-code"]);
  const PIECES = [
    "<",
    ">",
    '"',
    "'",
    "&",
    "`",
    "```",
    "*",
    "**",
    "_",
    "~~",
    "[",
    "]",
    "(",
    ")",
    "\\",
    "\n",
    "\n\n",
    " ",
    "  ",
    "-",
    "1.",
    "#",
    "|",
    "---",
    ">",
    "a",
    "word",
    "javascript:",
    "https://x.example/",
    "<script>",
    "<img src=x onerror=alert(1)>",
    "onerror=",
    "</code>",
    "&#106;",
    "\t",
  ];

  function random(seed: number) {
    return () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
  }

  function checkOnlyAllowedMarkup(html: string) {
    const withoutTags = html.replace(
      /<\/?([a-z0-9]+)((?:\s+[a-z-]+(?:="[^"<>]*")?)*)\s*>/g,
      (_, tag: string, attrs: string) => {
        expect(ALLOWED_TAGS, `tag <${tag}> in ${html}`).toContain(tag);
        for (const [, name, value] of attrs.matchAll(/([a-z-]+)(?:="([^"]*)")?/g)) {
          expect(ALLOWED_ATTRIBUTES, `attribute ${name} in ${html}`).toContain(name);
          if (name === "href") expect(value).toMatch(/^https?:\/\//i);
        }
        return "";
      },
    );
    // Whatever is not one of our tags must be plain text: no raw < or >.
    expect(withoutTags).not.toMatch(/[<>]/);
  }

  it("has a checker that notices stray markup", () => {
    expect(() => checkOnlyAllowedMarkup("<p><img src=x></p>")).toThrow();
    expect(() => checkOnlyAllowedMarkup('<a href="javascript:x">y</a>')).toThrow();
    expect(() => checkOnlyAllowedMarkup('<p onclick="x">y</p>')).toThrow();
  });

  it("never emits a tag or attribute outside the allowed set", () => {
    const next = random(42);
    for (let round = 0; round < 2000; round++) {
      let source = "";
      const length = 1 + Math.floor(next() * 40);
      for (let k = 0; k < length; k++) source += PIECES[Math.floor(next() * PIECES.length)];
      checkOnlyAllowedMarkup(md(source));
    }
  });
});

describe("safeHref", () => {
  it("accepts only absolute http(s) URLs", () => {
    expect(safeHref("https://example.com")).toBe("https://example.com");
    expect(safeHref("HTTP://EXAMPLE.COM")).toBe("HTTP://EXAMPLE.COM");
    expect(safeHref("https://")).toBeNull();
    expect(safeHref("mailto:a@b.c")).toBeNull();
  });
});
