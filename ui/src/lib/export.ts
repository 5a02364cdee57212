// A conversation as a file to keep or share: Markdown to read (a message's
// pictures are only counted), JSON with everything Cake stores (settings,
// reply statistics and picture ids included).

import type { Conversation } from "../api/types";
import { displayTitle } from "./conversation";

export type ExportFormat = "markdown" | "json";

const EXTENSIONS: Record<ExportFormat, string> = { markdown: "md", json: "json" };
export const EXPORT_TYPES: Record<ExportFormat, string> = {
  markdown: "text/markdown;charset=utf-8",
  json: "application/json",
};

/** The file's text. */
export function exportText(conversation: Conversation, format: ExportFormat): string {
  if (format === "json") return `${JSON.stringify(conversation, null, 2)}\n`;
  const lines = [`# ${displayTitle(conversation)}`, ""];
  const about = [
    conversation.model_id ? `Model: ${conversation.model_id}` : null,
    `Last changed ${conversation.updated_at}`,
  ].filter((part) => part !== null);
  lines.push(`_${about.join(" · ")}_`, "");
  if (conversation.system_prompt.trim() !== "") {
    lines.push("## System prompt", "", conversation.system_prompt.trim(), "");
  }
  for (const message of conversation.messages) {
    lines.push(message.role === "user" ? "## You" : message.role === "assistant" ? "## Assistant" : "## System", "");
    const pictures = message.pictures?.length ?? 0;
    if (pictures > 0) lines.push(pictures === 1 ? "_(a picture)_" : `_(${pictures} pictures)_`, "");
    if (message.content.trim() !== "") lines.push(message.content.trim(), "");
    if (message.stopped) lines.push("_(stopped by you)_", "");
  }
  return `${lines.join("\n").trimEnd()}\n`;
}

/** A file name from the title: characters file systems refuse left out, `conversation` if nothing is left. */
export function exportFileName(conversation: Conversation, format: ExportFormat): string {
  const base = displayTitle(conversation)
    // eslint-disable-next-line no-control-regex
    .replace(/[\\/:*?"<>|\u0000-\u001f…]/g, "")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 80)
    .trim();
  return `${base === "" ? "conversation" : base}.${EXTENSIONS[format]}`;
}
