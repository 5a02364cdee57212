// A small incremental parser for `text/event-stream` bodies (Server-Sent
// Events). Feed it text as it arrives; it calls `onData` with the joined
// `data:` lines of each event. Other fields (event:, id:, retry:) and
// comment lines are ignored: Cake only sends `data: <json>` events.

export class SseParser {
  private buffer = "";
  private dataLines: string[] = [];

  constructor(private readonly onData: (data: string) => void) {}

  /** Parse a chunk of text; chunks may split lines anywhere. */
  feed(chunk: string): void {
    this.buffer += chunk;
    let newline = this.buffer.indexOf("\n");
    while (newline !== -1) {
      const line = this.buffer.slice(0, newline).replace(/\r$/, "");
      this.buffer = this.buffer.slice(newline + 1);
      this.handleLine(line);
      newline = this.buffer.indexOf("\n");
    }
  }

  /** The body ended: flush a last event even if its blank line is missing. */
  end(): void {
    if (this.buffer !== "") this.handleLine(this.buffer.replace(/\r$/, ""));
    this.buffer = "";
    this.dispatch();
  }

  private handleLine(line: string): void {
    if (line === "") {
      this.dispatch();
      return;
    }
    if (line.startsWith(":")) return; // comment / keep-alive
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.dataLines.push(value);
  }

  private dispatch(): void {
    if (this.dataLines.length === 0) return;
    const data = this.dataLines.join("\n");
    this.dataLines = [];
    this.onData(data);
  }
}
