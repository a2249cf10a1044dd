import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'MAC_ADDRESS')
    .map((d) => text.slice(d.start, d.end));

describe('MAC_ADDRESS', () => {
  it.each([
    ['00:1A:2B:3C:4D:5E', '00:1A:2B:3C:4D:5E'],
    ['ether 00-1a-2b-3c-4d-5e txqueuelen', '00-1a-2b-3c-4d-5e'],
    ['mac 001a.2b3c.4d5e', '001a.2b3c.4d5e'],
    ['设备00:1a:2b:3c:4d:5e已连接', '00:1a:2b:3c:4d:5e'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    '00:1A:2B:3C:4D',
    '00:1A:2B:3C:4D:5E:6F',
    '00:1A-2B:3C:4D:5E',
    '00:00:00:00:00:00',
    'ff:ff:ff:ff:ff:ff',
    'x00:1A:2B:3C:4D:5E',
    'build 1234.5678.9abc',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });
});
