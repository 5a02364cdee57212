// A small reader for WAV files of 16-bit PCM, enough to draw waveforms of
// voice prompts and clips. It walks the RIFF chunks (any order, odd sizes
// padded, unknown chunks skipped), accepts plain PCM and the
// WAVE_FORMAT_EXTENSIBLE form of it, mixes several channels down to one,
// and tolerates a data chunk whose size overstates what is there (a file
// still being written, or cut short).

export interface WavAudio {
  sampleRate: number;
  /** Channels in the file (the samples below are mixed down to mono). */
  channels: number;
  /** Mono samples in −1 … 1. */
  samples: Float32Array;
  durationS: number;
}

const FORMAT_PCM = 1;
const FORMAT_EXTENSIBLE = 0xfffe;

function tag(view: DataView, offset: number): string {
  let text = "";
  for (let i = 0; i < 4; i++) text += String.fromCharCode(view.getUint8(offset + i));
  return text;
}

interface Format {
  format: number;
  channels: number;
  sampleRate: number;
  bitsPerSample: number;
}

function readFormat(view: DataView, start: number, size: number): Format {
  if (size < 16) throw new Error("Not a usable WAV file: its fmt chunk is too short.");
  let format = view.getUint16(start, true);
  const channels = view.getUint16(start + 2, true);
  const sampleRate = view.getUint32(start + 4, true);
  const bitsPerSample = view.getUint16(start + 14, true);
  // WAVE_FORMAT_EXTENSIBLE keeps the real format in the first two bytes of its sub-format GUID.
  if (format === FORMAT_EXTENSIBLE && size >= 26) format = view.getUint16(start + 24, true);
  return { format, channels, sampleRate, bitsPerSample };
}

/** Parse a WAV file; throws an Error saying what is wrong with anything else. */
export function parseWav(bytes: Uint8Array): WavAudio {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 12 || tag(view, 0) !== "RIFF" || tag(view, 8) !== "WAVE") {
    throw new Error("Not a WAV file: the RIFF/WAVE header is missing.");
  }
  let format: Format | null = null;
  let data: { start: number; size: number } | null = null;
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const id = tag(view, offset);
    const declared = view.getUint32(offset + 4, true);
    const start = offset + 8;
    const size = Math.min(declared, bytes.length - start);
    if (id === "fmt ") format = readFormat(view, start, size);
    else if (id === "data" && data === null) data = { start, size };
    offset = start + declared + (declared % 2); // chunks are padded to even sizes
  }
  if (format === null) throw new Error("Not a usable WAV file: it has no fmt chunk.");
  if (data === null) throw new Error("Not a usable WAV file: it has no data chunk.");
  if (format.format !== FORMAT_PCM || format.bitsPerSample !== 16) {
    throw new Error(
      `Unsupported WAV encoding (format ${format.format}, ${format.bitsPerSample}-bit): only 16-bit PCM can be read.`,
    );
  }
  if (format.channels < 1) throw new Error("Not a usable WAV file: it declares no channels.");
  if (format.sampleRate < 1) throw new Error("Not a usable WAV file: its sample rate is 0.");

  const channels = format.channels;
  const frameBytes = 2 * channels;
  const frames = Math.floor(data.size / frameBytes);
  const samples = new Float32Array(frames);
  for (let frame = 0; frame < frames; frame++) {
    let sum = 0;
    const base = data.start + frame * frameBytes;
    for (let channel = 0; channel < channels; channel++) sum += view.getInt16(base + 2 * channel, true);
    samples[frame] = sum / channels / 32768;
  }
  return { sampleRate: format.sampleRate, channels, samples, durationS: frames / format.sampleRate };
}
