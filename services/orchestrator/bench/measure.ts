/** Figures and helpers shared by the orchestrator's benchmarks (gateway.bench.ts, ab.ts). */
import { readFileSync } from 'node:fs';

/** CPU milliseconds (user + system) a process has used so far, from /proc. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
}

/** The value at quantile `q` (0..1) of a non-empty list. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length * q)] ?? 0;
}

/** Median of a non-empty list. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/**
 * After a failed run, what the peers said on stderr (their last 4 KB each): the gateway logs
 * the cause of a failed backend or interceptor call there, which the client's error omits.
 */
export function printStderrTails(peers: ReadonlyArray<{ service: string; stderr(): string }>) {
  for (const peer of peers) {
    const text = peer.stderr().trim();
    if (text) console.error(`--- ${peer.service} stderr (tail)\n${text.slice(-4096)}`);
  }
}
