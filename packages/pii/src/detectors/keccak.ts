/**
 * Keccak-256 (the pre-standard SHA-3 padding Ethereum uses; node:crypto only offers the
 * standardised SHA3-256), for EIP-55 checksums. 64-bit lanes are held as pairs of 32-bit
 * words (low, high) in a Uint32Array.
 */

const ROUND_CONSTANTS = [
  0x0000000000000001n,
  0x0000000000008082n,
  0x800000000000808an,
  0x8000000080008000n,
  0x000000000000808bn,
  0x0000000080000001n,
  0x8000000080008081n,
  0x8000000000008009n,
  0x000000000000008an,
  0x0000000000000088n,
  0x0000000080008009n,
  0x000000008000000an,
  0x000000008000808bn,
  0x800000000000008bn,
  0x8000000000008089n,
  0x8000000000008003n,
  0x8000000000008002n,
  0x8000000000000080n,
  0x000000000000800an,
  0x800000008000000an,
  0x8000000080008081n,
  0x8000000000008080n,
  0x0000000080000001n,
  0x8000000080008008n,
];
const RC_LO = Uint32Array.from(ROUND_CONSTANTS, (c) => Number(c & 0xffffffffn));
const RC_HI = Uint32Array.from(ROUND_CONSTANTS, (c) => Number(c >> 32n));
// Rotation offsets r[x + 5y].
const ROTATIONS = [
  0, 1, 62, 28, 27, 36, 44, 6, 55, 20, 3, 10, 43, 25, 39, 41, 45, 15, 21, 8, 18, 2, 61, 56, 14,
];
// Destination lane of lane x + 5y under π: y + 5((2x + 3y) mod 5).
const PI = Array.from({ length: 25 }, (_, i) => {
  const x = i % 5;
  const y = Math.floor(i / 5);
  return y + 5 * ((2 * x + 3 * y) % 5);
});

function keccakF(s: Uint32Array, b: Uint32Array, c: Uint32Array): void {
  for (let round = 0; round < 24; round++) {
    // θ
    for (let x = 0; x < 5; x++) {
      c[2 * x] =
        (s[2 * x] ?? 0) ^
        (s[2 * x + 10] ?? 0) ^
        (s[2 * x + 20] ?? 0) ^
        (s[2 * x + 30] ?? 0) ^
        (s[2 * x + 40] ?? 0);
      c[2 * x + 1] =
        (s[2 * x + 1] ?? 0) ^
        (s[2 * x + 11] ?? 0) ^
        (s[2 * x + 21] ?? 0) ^
        (s[2 * x + 31] ?? 0) ^
        (s[2 * x + 41] ?? 0);
    }
    for (let x = 0; x < 5; x++) {
      const x1 = ((x + 1) % 5) * 2;
      const x4 = ((x + 4) % 5) * 2;
      const lo = c[x1] ?? 0;
      const hi = c[x1 + 1] ?? 0;
      const dLo = (c[x4] ?? 0) ^ ((lo << 1) | (hi >>> 31));
      const dHi = (c[x4 + 1] ?? 0) ^ ((hi << 1) | (lo >>> 31));
      for (let y = 0; y < 25; y += 5) {
        const i = 2 * (x + y);
        s[i] = (s[i] ?? 0) ^ dLo;
        s[i + 1] = (s[i + 1] ?? 0) ^ dHi;
      }
    }
    // ρ and π
    for (let i = 0; i < 25; i++) {
      const lo = s[2 * i] ?? 0;
      const hi = s[2 * i + 1] ?? 0;
      const r = ROTATIONS[i] ?? 0;
      const d = 2 * (PI[i] ?? 0);
      if (r === 0) {
        b[d] = lo;
        b[d + 1] = hi;
      } else if (r < 32) {
        b[d] = (lo << r) | (hi >>> (32 - r));
        b[d + 1] = (hi << r) | (lo >>> (32 - r));
      } else if (r === 32) {
        b[d] = hi;
        b[d + 1] = lo;
      } else {
        const m = r - 32;
        b[d] = (hi << m) | (lo >>> (32 - m));
        b[d + 1] = (lo << m) | (hi >>> (32 - m));
      }
    }
    // χ
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x++) {
        const i = 2 * (x + y);
        const i1 = 2 * (((x + 1) % 5) + y);
        const i2 = 2 * (((x + 2) % 5) + y);
        s[i] = (b[i] ?? 0) ^ (~(b[i1] ?? 0) & (b[i2] ?? 0));
        s[i + 1] = (b[i + 1] ?? 0) ^ (~(b[i1 + 1] ?? 0) & (b[i2 + 1] ?? 0));
      }
    }
    // ι
    s[0] = (s[0] ?? 0) ^ (RC_LO[round] ?? 0);
    s[1] = (s[1] ?? 0) ^ (RC_HI[round] ?? 0);
  }
}

/** Keccak-256 digest of `data`. */
export function keccak256(data: Uint8Array): Uint8Array {
  const rate = 136;
  const padded = new Uint8Array(Math.floor(data.length / rate + 1) * rate);
  padded.set(data);
  padded[data.length] = (padded[data.length] ?? 0) ^ 0x01;
  padded[padded.length - 1] = (padded[padded.length - 1] ?? 0) ^ 0x80;
  const state = new Uint32Array(50);
  const b = new Uint32Array(50);
  const c = new Uint32Array(10);
  const view = new DataView(padded.buffer, padded.byteOffset, padded.byteLength);
  for (let off = 0; off < padded.length; off += rate) {
    for (let w = 0; w < rate / 4; w++)
      state[w] = (state[w] ?? 0) ^ view.getUint32(off + 4 * w, true);
    keccakF(state, b, c);
  }
  const out = new Uint8Array(32);
  const outView = new DataView(out.buffer);
  for (let w = 0; w < 8; w++) outView.setUint32(4 * w, state[w] ?? 0, true);
  return out;
}
