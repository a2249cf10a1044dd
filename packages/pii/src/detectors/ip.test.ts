import { describe, expect, it } from 'vitest';
import { createPiiEngine } from '../index.ts';
import { ipv6Groups } from './ip.ts';

const engine = createPiiEngine();
const found = (text: string) =>
  engine
    .detect(text)
    .filter((d) => d.type === 'IP_ADDRESS')
    .map((d) => text.slice(d.start, d.end));

describe('IP_ADDRESS', () => {
  it.each([
    ['Connection from 192.168.1.1 refused', '192.168.1.1'],
    ['8.8.8.8', '8.8.8.8'],
    ['?%20\\|106.31.73.20|%20/', '106.31.73.20'],
    ['address 41.173.96.26.', '41.173.96.26'],
    ['2001:0db8:85a3:0000:0000:8a2e:0370:7334', '2001:0db8:85a3:0000:0000:8a2e:0370:7334'],
    ['host 2001:db8::8a2e:370:7334 is up', '2001:db8::8a2e:370:7334'],
    ['mapped ::ffff:192.0.2.128 here', '::ffff:192.0.2.128'],
    ['link fe80::1ff:fe23:4567:890a%eth0 up', 'fe80::1ff:fe23:4567:890a%eth0'],
    ['http://[2001:db8::1]:8080/', '2001:db8::1'],
    ['ip ::1', '::1'],
    ['6e40:4041:c617:e898:c11:40d2:c669:2eb4', '6e40:4041:c617:e898:c11:40d2:c669:2eb4'],
    ['地址192.168.0.1。', '192.168.0.1'],
  ])('finds %j', (text, value) => {
    expect(found(text)).toEqual([value]);
  });

  it.each([
    '256.1.1.1',
    '1.2.3',
    '10.0.0.300',
    '01.02.03.04',
    'version 1.2.3.4',
    'v1.2.3.4',
    '1.2.3.4.5',
    'at 12:30:45',
    '2001:db8::85a3::7334',
    '2001:db8:85a3:0:0:8a2e:370',
    '12345::1',
    'dead::beef',
    'std::vector',
  ])('ignores %j', (text) => {
    expect(found(text)).toEqual([]);
  });

  it.each([
    ['::', { groups: 0, compressed: true }],
    ['1:2:3:4:5:6:7:8', { groups: 8, compressed: false }],
    ['1:2:3:4:5:6:7::', { groups: 7, compressed: true }],
    ['1:2:3:4:5:6:7:8::', null],
    ['::ffff:1.2.3.4', { groups: 3, compressed: true }],
    ['1:2:3:4:5:6:1.2.3.4', { groups: 8, compressed: false }],
  ])('ipv6Groups(%s)', (value, shape) => {
    expect(ipv6Groups(value)).toEqual(shape);
  });
});
