// Raw PCM chunks as `speak` streams them (`{type: "audio", pcm16_base64}`):
// mono signed 16-bit little-endian samples, base64-encoded, turned into the
// −1 … 1 floats Web Audio plays.

import { base64ToBytes } from "./base64";

/** The samples of a base64 chunk of 16-bit PCM; throws an Error on a chunk that is not whole samples. */
export function pcm16Samples(base64: string): Float32Array<ArrayBuffer> {
  const bytes = base64ToBytes(base64);
  if (bytes.length % 2 !== 0) {
    throw new Error(`Cake sent ${bytes.length} bytes of 16-bit audio: not a whole number of samples.`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const samples = new Float32Array(bytes.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
  return samples;
}
