// Builds small WAV files in memory for the tests: 16-bit PCM by default,
// with options to make them odd (other formats, extra chunks, a short data
// chunk, the fmt chunk after the data).

export interface WavOptions {
  sampleRate?: number;
  channels?: number;
  /** The fmt chunk's format tag (1 = PCM, 3 = float, 0xfffe = extensible). */
  format?: number;
  bitsPerSample?: number;
  /** For format 0xfffe: the sub-format's tag. */
  subFormat?: number;
  /** Chunks written before fmt (e.g. a LIST chunk); odd sizes get a pad byte. */
  extraChunks?: { id: string; bytes: Uint8Array }[];
  /** Write the data chunk before the fmt chunk. */
  dataFirst?: boolean;
  /** Declare a data size other than the real one (e.g. larger, as a cut file does). */
  declaredDataSize?: number;
}

function chunk(id: string, body: Uint8Array, declaredSize = body.length): Uint8Array {
  const padded = body.length + (body.length % 2);
  const out = new Uint8Array(8 + padded);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 4; i++) out[i] = id.charCodeAt(i);
  view.setUint32(4, declaredSize, true);
  out.set(body, 8);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** A WAV file of `samples` (interleaved when several channels; values in −1 … 1). */
export function buildWav(samples: readonly number[], options: WavOptions = {}): Uint8Array<ArrayBuffer> {
  const sampleRate = options.sampleRate ?? 24000;
  const channels = options.channels ?? 1;
  const format = options.format ?? 1;
  const bits = options.bitsPerSample ?? 16;
  const extensible = format === 0xfffe;

  const fmt = new Uint8Array(extensible ? 40 : 16);
  const fv = new DataView(fmt.buffer);
  fv.setUint16(0, format, true);
  fv.setUint16(2, channels, true);
  fv.setUint32(4, sampleRate, true);
  fv.setUint32(8, (sampleRate * channels * bits) / 8, true);
  fv.setUint16(12, (channels * bits) / 8, true);
  fv.setUint16(14, bits, true);
  if (extensible) {
    fv.setUint16(16, 22, true); // cbSize
    fv.setUint16(18, bits, true); // valid bits
    fv.setUint16(24, options.subFormat ?? 1, true); // GUID starts with the format tag
  }

  const data = new Uint8Array(samples.length * 2);
  const dv = new DataView(data.buffer);
  samples.forEach((value, i) => {
    const clamped = Math.max(-1, Math.min(1, value));
    dv.setInt16(2 * i, Math.round(clamped < 0 ? clamped * 32768 : clamped * 32767), true);
  });

  const fmtChunk = chunk("fmt ", fmt);
  const dataChunk = chunk("data", data, options.declaredDataSize ?? data.length);
  const extras = (options.extraChunks ?? []).map(({ id, bytes }) => chunk(id, bytes));
  const body = options.dataFirst ? [...extras, dataChunk, fmtChunk] : [...extras, fmtChunk, dataChunk];

  const riff = new Uint8Array(12);
  const rv = new DataView(riff.buffer);
  for (let i = 0; i < 4; i++) riff[i] = "RIFF".charCodeAt(i);
  for (let i = 0; i < 4; i++) riff[8 + i] = "WAVE".charCodeAt(i);
  const all = concat([riff, ...body]);
  rv.setUint32(4, all.length - 8, true);
  all.set(riff, 0);
  return all;
}
