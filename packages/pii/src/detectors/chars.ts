/**
 * `text.charCodeAt(i)`, or -1 outside the text. Reading past either end with charCodeAt gives
 * NaN, and optimized code that never saw it is thrown away the first time it does (V8
 * "out of bounds" deoptimization), to be compiled again: the scanners read their neighbours
 * through this instead.
 */
export function codeAt(text: string, i: number): number {
  return i >= 0 && i < text.length ? text.charCodeAt(i) : -1;
}
