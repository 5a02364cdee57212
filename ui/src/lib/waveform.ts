// Waveforms: a long run of samples reduced to a few hundred min/max bins,
// one bar each when drawn.

export interface Peak {
  min: number;
  max: number;
}

/**
 * Split `samples` into `bins` runs of (nearly) equal length and keep each
 * run's lowest and highest sample. With fewer samples than bins there is
 * one bin per sample; no samples give no bins.
 */
export function waveformPeaks(samples: ArrayLike<number>, bins: number): Peak[] {
  const count = Math.min(Math.max(Math.floor(bins), 0), samples.length);
  const peaks: Peak[] = [];
  for (let bin = 0; bin < count; bin++) {
    // Integer bounds spread the remainder of an uneven split over the bins.
    const start = Math.floor((bin * samples.length) / count);
    const end = Math.floor(((bin + 1) * samples.length) / count);
    let min = samples[start];
    let max = samples[start];
    for (let i = start + 1; i < end; i++) {
      const value = samples[i];
      if (value < min) min = value;
      if (value > max) max = value;
    }
    peaks.push({ min, max });
  }
  return peaks;
}

/**
 * Merge peaks down to at most `count` (each keeps the extremes of the
 * peaks it covers), e.g. to draw one bar per pixel column.
 */
export function mergePeaks(peaks: readonly Peak[], count: number): Peak[] {
  if (peaks.length <= count) return [...peaks];
  const mins = peaks.map((peak) => peak.min);
  const maxs = peaks.map((peak) => peak.max);
  const low = waveformPeaks(mins, count);
  const high = waveformPeaks(maxs, count);
  return low.map((bin, i) => ({ min: bin.min, max: high[i].max }));
}

/** The largest magnitude in the peaks (0 for silence or none): drawing scales to it. */
export function peakLevel(peaks: readonly Peak[]): number {
  let level = 0;
  for (const { min, max } of peaks) level = Math.max(level, Math.abs(min), Math.abs(max));
  return level;
}
