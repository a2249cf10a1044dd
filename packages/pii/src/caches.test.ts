/**
 * The detectors' memo caches keep no caller-sized strings: values and property names a
 * payload chooses (JWT-shaped strings, argument keys of megabytes) are not retained by the
 * engine once the call is over. Measured on the heap after a forced collection (other tests
 * in parallel move it by some MB: the bound is half of what was held before).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createPiiEngine } from './index.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap growth (MB) that outlives `run`. */
function retainedMb(run: () => void): number {
  const collect = () => {
    for (let i = 0; i < 3; i++) gc();
  };
  collect();
  const before = process.memoryUsage().heapUsed;
  run();
  collect();
  return (process.memoryUsage().heapUsed - before) / 1e6;
}

const engine = createPiiEngine();
const MB2 = 2_000_000;

describe('detector caches', () => {
  it('keep no JWT-shaped value of megabytes (30 x 2 MB held +60 MB before)', () => {
    const header = Buffer.from('{"alg":"HS256"}').toString('base64url');
    const retained = retainedMb(() => {
      for (let i = 0; i < 30; i++) {
        const text = `${header}.${'A'.repeat(MB2)}${i}.sig`;
        const out = engine.transformMcp('response', 'tools/call', {
          content: [{ type: 'text', text }],
        });
        expect(out.counts.JWT).toBe(1);
      }
    });
    expect(retained).toBeLessThan(30);
  }, 60_000);

  it('keep no argument name of megabytes (30 x 2 MB held +62 MB before)', () => {
    const retained = retainedMb(() => {
      for (let i = 0; i < 30; i++) {
        const args = { [`${'k'.repeat(MB2)}${i}_password`]: 'hunter2hunter2' };
        expect(engine.guard('tools/call', { name: 't', arguments: args }).allowed).toBe(false);
      }
    });
    expect(retained).toBeLessThan(30);
  }, 60_000);
});
