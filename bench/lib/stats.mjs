// Numbers: the seeded order contenders run in each round, nearest-rank percentiles and summaries
// of samples, and how times, sizes and ratios are printed.

// The order the contenders run in, in round `round`: a shuffle seeded by the round, the same in
// every run of the benchmark. A rotation would keep each contender's predecessor fixed, and so
// whatever one contender leaves behind (a container being torn down, an interpreter starting)
// would always fall on the same next one.
export function roundOrder(names, round) {
  let state = (round + 1) * 0x9e3779b9 >>> 0;
  const next = () => {  // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const order = [...names];
  for (let i = order.length - 1; i > 0; --i) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

export function percentile(samples, p) {
  if (samples.length === 0) {
    return NaN;
  }
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest rank: the smallest sample with at least p% of the samples at or below it.
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

export function summary(samples) {
  return {
    n: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    min: Math.min(...samples),
    max: Math.max(...samples),
  };
}

export const mib = (bytes) => bytes / 1024 ** 2;

export const ms = (value) => (Number.isFinite(value) ? value.toFixed(0) : 'n/a');
export const MiB = (value) => (Number.isFinite(value) ? mib(value).toFixed(1) : 'n/a');
export const ratio = (value) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
