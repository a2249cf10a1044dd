/**
 * CRYPTO wallet addresses, each with its real checksum:
 * - Bitcoin P2PKH/P2SH (`1…`/`3…`): base58check, 25 bytes, version 0x00 or 0x05, the first four
 *   bytes of SHA-256(SHA-256(payload)) (node:crypto). 0.9.
 * - Bitcoin SegWit (`bc1…`): bech32 (witness v0, 20- or 32-byte program) or bech32m (v1–16,
 *   2–40 bytes) checksum, one case only. 0.9.
 * - Ethereum (`0x` + 40 hex): mixed case must carry a valid EIP-55 checksum (Keccak-256), 0.9;
 *   single-case addresses carry no checksum, 0.5.
 */
import { createHash } from 'node:crypto';
import { codeAt } from './chars.ts';
import { keccak256 } from './keccak.ts';
import {
  type Candidate,
  contextRule,
  digitRunsOf,
  forEachMatchAt,
  HAS_DIGIT,
  memoize,
  type Recognizer,
  type TextScans,
} from './recognizer.ts';

const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
// One pattern for the three forms: Ethereum, SegWit, base58check.
/** Exported for tests (sticky). */
export const ADDRESS =
  /(?<![A-Za-z0-9])(?:0x[0-9a-fA-F]{40}|(?:bc1|BC1)[02-9ac-hj-np-zAC-HJ-NP-Z]{8,87}|[13][1-9A-HJ-NP-Za-km-z]{25,34})(?![A-Za-z0-9])/y;

function isAsciiAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

/**
 * Where an address may start (ascending): every form begins at a digit group — `0x…`, `1…`
 * and `3…` at the group itself, `bc1…` two before its `1` — with no letter or digit before.
 */
export function addressStarts(text: string, scans: TextScans | undefined): number[] {
  const starts: number[] = [];
  for (const g of digitRunsOf(text, scans).groups) {
    const c = text.charCodeAt(g);
    if (c === 49 || c === 51 || (c === 48 && codeAt(text, g + 1) === 120)) {
      if (!isAsciiAlnum(codeAt(text, g - 1))) starts.push(g);
      else if (
        c === 49 &&
        (text.startsWith('bc', g - 2) || text.startsWith('BC', g - 2)) &&
        !isAsciiAlnum(codeAt(text, g - 3))
      ) {
        starts.push(g - 2);
      }
    }
  }
  return starts;
}

/** Decode base58 to bytes, or `undefined` on a character outside the alphabet. */
export function base58Decode(s: string): Uint8Array | undefined {
  const bytes: number[] = [];
  for (const ch of s) {
    let carry = BASE58_ALPHABET.indexOf(ch);
    if (carry < 0) return undefined;
    for (let i = 0; i < bytes.length; i++) {
      carry += (bytes[i] ?? 0) * 58;
      bytes[i] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  for (const ch of s) {
    if (ch !== '1') break;
    bytes.push(0);
  }
  return Uint8Array.from(bytes.reverse());
}

function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

/** Whether `address` is a mainnet P2PKH or P2SH base58check address. */
export function isBase58Address(address: string): boolean {
  const bytes = base58Decode(address);
  if (bytes === undefined || bytes.length !== 25) return false;
  if (bytes[0] !== 0x00 && bytes[0] !== 0x05) return false;
  const check = sha256(sha256(bytes.subarray(0, 21)));
  return check.subarray(0, 4).equals(bytes.subarray(21));
}

const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const BECH32_GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
const BECH32M_CONST = 0x2bc830a3;

function polymod(values: readonly number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = (((chk & 0x1ffffff) << 5) ^ v) >>> 0;
    for (let i = 0; i < 5; i++) {
      if ((top >>> i) & 1) chk = (chk ^ (BECH32_GENERATOR[i] ?? 0)) >>> 0;
    }
  }
  return chk;
}

function convertBits(data: readonly number[], from: number, to: number): number[] | undefined {
  let acc = 0;
  let bits = 0;
  const out: number[] = [];
  const maxv = (1 << to) - 1;
  for (const v of data) {
    acc = (acc << from) | v;
    bits += from;
    while (bits >= to) {
      bits -= to;
      out.push((acc >>> bits) & maxv);
    }
  }
  if (bits >= from || ((acc << (to - bits)) & maxv) !== 0) return undefined;
  return out;
}

/** Whether `address` is a valid mainnet SegWit address (bech32 v0 or bech32m v1+). */
export function isSegwitAddress(address: string): boolean {
  if (address !== address.toLowerCase() && address !== address.toUpperCase()) return false;
  const lower = address.toLowerCase();
  const sep = lower.lastIndexOf('1');
  const hrp = lower.slice(0, sep);
  if (hrp !== 'bc') return false;
  const data: number[] = [];
  for (const ch of lower.slice(sep + 1)) {
    const v = BECH32_CHARSET.indexOf(ch);
    if (v < 0) return false;
    data.push(v);
  }
  if (data.length < 7) return false;
  const expanded = [...[...hrp].map((c) => c.charCodeAt(0) >> 5), 0];
  for (const c of hrp) expanded.push(c.charCodeAt(0) & 31);
  const check = polymod([...expanded, ...data]);
  const version = data[0] ?? -1;
  if (version > 16) return false;
  if (check !== (version === 0 ? 1 : BECH32M_CONST)) return false;
  const program = convertBits(data.slice(1, -6), 5, 8);
  if (program === undefined || program.length < 2 || program.length > 40) return false;
  return version !== 0 || program.length === 20 || program.length === 32;
}

/** Whether a mixed-case `0x…` address carries a valid EIP-55 checksum. */
export function isEip55Checksummed(address: string): boolean {
  const hex = address.slice(2);
  const hash = keccak256(Buffer.from(hex.toLowerCase(), 'ascii'));
  for (let i = 0; i < 40; i++) {
    const ch = hex[i] ?? '';
    if (/[0-9]/.test(ch)) continue;
    const nibble = ((hash[i >> 1] ?? 0) >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    if (nibble >= 8 !== (ch === ch.toUpperCase())) return false;
  }
  return true;
}

const CONTEXT = contextRule({
  words: [
    'bitcoin',
    'btc',
    'eth',
    'ethereum',
    'ether',
    'wallet',
    'address',
    'crypto',
    'send',
    'receive',
    'deposit',
    'withdraw',
    'usdt',
    'usdc',
    'erc20',
    'metamask',
  ],
});

function emit(m: RegExpExecArray, score: number, out: Candidate[]): void {
  out.push({
    type: 'CRYPTO',
    start: m.index,
    end: m.index + m[0].length,
    score,
    recognizer: 'crypto-wallet',
    context: CONTEXT,
  });
}

/** The score of a matched address (0: not valid). */
function addressScore(address: string): number {
  if (address.startsWith('0x')) {
    const hex = address.slice(2);
    if (hex === hex.toLowerCase() || hex === hex.toUpperCase()) return 0.5;
    return isEip55Checksummed(address) ? 0.9 : 0;
  }
  if (address.startsWith('bc1') || address.startsWith('BC1')) {
    return isSegwitAddress(address) ? 0.9 : 0;
  }
  return isBase58Address(address) ? 0.9 : 0;
}

// Keccak-256 and double SHA-256 cost microseconds; addresses recur across messages.
const cachedAddressScore = memoize(addressScore);

/** Recognizer for CRYPTO (Bitcoin and Ethereum addresses). */
export const cryptoWalletRecognizer: Recognizer = {
  name: 'crypto-wallet',
  types: ['CRYPTO'],
  requires: HAS_DIGIT,
  find(text, _env, out: Candidate[], scans) {
    forEachMatchAt(ADDRESS, text, addressStarts(text, scans), (m) => {
      const score = cachedAddressScore(m[0]);
      if (score > 0) emit(m, score, out);
    });
  },
};
