// Random ids for conversations and streams: [A-Za-z0-9_-], as api.md requires.

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/** A random id of `length` characters from [A-Za-z0-9_-] (16 gives 96 bits). */
export function randomId(length = 16): string {
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  let id = "";
  // The alphabet has exactly 64 characters, so `byte & 63` is unbiased.
  for (const byte of bytes) id += ALPHABET[byte & 63];
  return id;
}

/** A random unsigned 32-bit integer, used as a fresh sampling seed. */
export function randomSeed(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}
