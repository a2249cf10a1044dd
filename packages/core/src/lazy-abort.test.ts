import { describe, expect, it } from 'vitest';
import { LazyAbortController, signalOf } from './lazy-abort.ts';

describe('LazyAbortController', () => {
  it('makes one signal on first use, live until abort', () => {
    const lazy = new LazyAbortController();
    const signal = lazy.signal;
    expect(lazy.signal).toBe(signal);
    expect(signalOf(lazy.lazySignal)).toBe(signal);
    expect(signal.aborted).toBe(false);
    let heard: unknown;
    signal.addEventListener('abort', () => {
      heard = signal.reason;
    });
    lazy.abort(new Error('stop'));
    expect(signal.aborted).toBe(true);
    expect((heard as Error).message).toBe('stop');
    expect(lazy.aborted).toBe(true);
  });

  it('hands out an already-aborted signal, with the reason, when abort came first', () => {
    const lazy = new LazyAbortController();
    lazy.abort('gone');
    lazy.abort('ignored: only the first abort counts');
    expect(lazy.aborted).toBe(true);
    expect(lazy.reason).toBe('gone');
    expect(lazy.signal.aborted).toBe(true);
    expect(lazy.signal.reason).toBe('gone');
  });

  it('defaults the reason to an AbortError', () => {
    const lazy = new LazyAbortController();
    lazy.abort();
    expect((lazy.signal.reason as DOMException).name).toBe('AbortError');
  });

  it('signalOf passes a plain signal through', () => {
    const signal = AbortSignal.abort('x');
    expect(signalOf(signal)).toBe(signal);
  });
});
