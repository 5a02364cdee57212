// Bytes ↔ base64, for the API's `wav_base64` fields (uploads of voice
// prompts, and the audio of voices and clips).

/** Bytes per String.fromCharCode call: keeps the argument list well under engine limits. */
const CHUNK = 0x8000;

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let start = 0; start < bytes.length; start += CHUNK) {
    binary += String.fromCharCode(...bytes.subarray(start, start + CHUNK));
  }
  return btoa(binary);
}

/** Decode base64 (whitespace allowed); throws an Error on anything else. */
export function base64ToBytes(text: string): Uint8Array<ArrayBuffer> {
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    throw new Error("Cake sent audio that is not valid base64.");
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
