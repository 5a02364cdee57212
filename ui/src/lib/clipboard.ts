// Copy text to the clipboard. `navigator.clipboard` only exists in secure
// contexts (`cake serve` may be opened over plain http on a LAN), and a web
// view may refuse it, so there is a fallback through a hidden textarea.

export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // Refused (a web view that allows only the older way): try that.
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  if (!copied) throw new Error("Copying is not allowed here; select the text and copy it by hand.");
}
