import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { isBase58Address, isEip55Checksummed, isSegwitAddress } from './crypto-wallet.ts';
import { keccak256 } from './keccak.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'CRYPTO')
    .map((d) => text.slice(d.start, d.end));

describe('CRYPTO', () => {
  it.each([
    ['Send to 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'],
    ['3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy', '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy'],
    ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4'],
    ['BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4', 'BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4'],
    [
      'taproot bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0',
      'bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0',
    ],
    ['0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'],
    [
      'wallet 0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed',
      '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed',
    ],
    [
      '钱包0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359。',
      '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    ],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb',
    'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5',
    'bc1QW508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4',
    '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD',
    '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae',
    'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it('computes Keccak-256 (not SHA3-256)', () => {
    const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
    expect(hex(keccak256(new Uint8Array()))).toBe(
      'c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470',
    );
    expect(hex(keccak256(Buffer.from('abc')))).toBe(
      '4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45',
    );
  });

  it.each([
    '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
    '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
    '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
  ])('EIP-55 vector %s', (address) => {
    expect(isEip55Checksummed(address)).toBe(true);
  });

  it('checks base58check and bech32 directly', () => {
    expect(isBase58Address('1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2')).toBe(true);
    expect(isSegwitAddress('bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3')).toBe(
      true,
    );
  });
});
