/**
 * A seeded, generated evaluation corpus covering every entity type: valid values in varied
 * formats and sentences (other IBAN countries, IPv6, every secret format, checksummed wallet
 * addresses, international phone numbers from libphonenumber-js's example numbers), and
 * negatives — invalid checksums, wrong lengths, look-alikes (dates, times, versions, amounts,
 * order numbers, prose) — that carry no label, so anything reported there is a false positive.
 */
import { createHash } from 'node:crypto';
import {
  type CountryCode,
  getExampleNumber,
  type MetadataJson,
  parsePhoneNumberFromString,
} from 'libphonenumber-js/core';
import maxMetadata from 'libphonenumber-js/max/metadata';
import examples from 'libphonenumber-js/mobile/examples';
import { IBAN_LENGTHS } from '../src/detectors/iban.ts';
import { keccak256 } from '../src/detectors/keccak.ts';
import type { EntityType } from '../src/index.ts';
import type { LabelledText } from './score.ts';

/** Deterministic PRNG (mulberry32). */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  chars(alphabet: string, n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[Math.floor(this.next() * alphabet.length)];
    return s;
  }

  digits(n: number): string {
    return this.chars('0123456789', n);
  }

  bytes(n: number): Uint8Array {
    return Uint8Array.from({ length: n }, () => this.int(0, 255));
  }
}

type Part = string | { type: EntityType; value: string };

function compose(parts: readonly Part[]): LabelledText {
  let text = '';
  const spans: LabelledText['spans'] = [];
  for (const p of parts) {
    if (typeof p === 'string') {
      text += p;
    } else {
      spans.push({ type: p.type, start: text.length, end: text.length + p.value.length });
      text += p.value;
    }
  }
  return { text, spans };
}

/** Fill the `{}` of a template with a labelled value. */
function fill(template: string, type: EntityType, value: string): LabelledText {
  const [before = '', after = ''] = template.split('{}');
  return compose([before, { type, value }, after]);
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const UPPER_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const HEX = '0123456789abcdef';
const FIRST = [
  'Alice',
  'Bruno',
  'Chen',
  'Dmitri',
  'Elif',
  'Fatima',
  'Giulia',
  'Hiroshi',
  'Ines',
  'Jonas',
  'Kwame',
  'Lena',
  'Mateo',
  'Nadia',
  'Olga',
  'Pedro',
  'Rania',
  'Sofia',
  'Tomás',
  'Viktor',
  'Wen',
  'Yara',
  'Zoltan',
  'Åsa',
  'Noémie',
];
const LAST = [
  'Anders',
  'Baptiste',
  'Costa',
  'Dubois',
  'Eriksen',
  'Fischer',
  'García',
  'Haddad',
  'Ivanova',
  'Jensen',
  'Kowalski',
  'Larsen',
  'Moreau',
  'Nakamura',
  'Okafor',
  'Petrov',
  'Rossi',
  'Silva',
  'Tanaka',
  'Varga',
  'Wagner',
  'Yilmaz',
  "O'Brien",
  'Müller-Lüdenscheidt',
];
const DOMAINS = [
  'example.com',
  'mail.example.org',
  'firma.de',
  'correo.es',
  'uni-heidelberg.de',
  'company.co.uk',
  'startup.io',
  'posta.it',
  'xn--bcher-kva.ch',
];

function ascii(s: string): string {
  return s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z]/g, '');
}

function luhnComplete(rng: Rng, prefix: string, length: number): string {
  let body = prefix + rng.digits(length - prefix.length - 1);
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  body += String((10 - (sum % 10)) % 10);
  return body;
}

function groupDigits(digits: string, sizes: readonly number[], sep: string): string {
  const out: string[] = [];
  let i = 0;
  for (const n of sizes) {
    if (i >= digits.length) break;
    out.push(digits.slice(i, i + n));
    i += n;
  }
  if (i < digits.length) out.push(digits.slice(i));
  return out.join(sep);
}

function card(rng: Rng): string {
  const brands: ReadonlyArray<[prefixes: readonly string[], length: number, groups: number[]]> = [
    [['4'], 16, [4, 4, 4, 4]],
    [['4'], 13, [4, 4, 5]],
    [['51', '52', '53', '54', '55'], 16, [4, 4, 4, 4]],
    [['2221', '2500', '2720'], 16, [4, 4, 4, 4]],
    [['34', '37'], 15, [4, 6, 5]],
    [['6011', '65'], 16, [4, 4, 4, 4]],
    [['3528', '3566', '3589'], 16, [4, 4, 4, 4]],
    [['36', '38'], 14, [4, 6, 4]],
    [['62'], 16, [4, 4, 4, 4]],
    [['4'], 19, [4, 4, 4, 4, 3]],
  ];
  const [prefixes, length, groups] = rng.pick(brands);
  const digits = luhnComplete(rng, rng.pick(prefixes), length);
  const style = rng.int(0, 2);
  return style === 0 ? digits : groupDigits(digits, groups, style === 1 ? ' ' : '-');
}

function ibanCheck(country: string, bban: string): string {
  const rearranged = `${bban}${country}00`.toUpperCase();
  let r = 0;
  for (const ch of rearranged) {
    const c = ch.charCodeAt(0);
    r = c >= 65 ? (r * 100 + (c - 55)) % 97 : (r * 10 + (c - 48)) % 97;
  }
  return String(98 - r).padStart(2, '0');
}

const IBAN_COUNTRIES = [
  'DE',
  'FR',
  'ES',
  'IT',
  'NL',
  'BE',
  'CH',
  'AT',
  'PL',
  'NO',
  'MT',
  'SA',
  'BR',
  'SE',
  'IE',
  'PT',
  'GB',
  'LU',
  'DK',
  'FI',
  'GR',
  'TR',
  'AE',
  'IL',
  'RO',
  'HU',
  'CZ',
  'SK',
  'SI',
  'HR',
];

function iban(rng: Rng, country = rng.pick(IBAN_COUNTRIES)): string {
  const length = IBAN_LENGTHS[country] ?? 22;
  const letters = ['GB', 'NL', 'IE', 'MT', 'BG'].includes(country) ? 4 : 0;
  const bban = rng.chars('ABCDEFGHIJKLMNOPQRSTUVWXYZ', letters) + rng.digits(length - 4 - letters);
  const compact = `${country}${ibanCheck(country, bban)}${bban}`;
  const style = rng.int(0, 3);
  if (style === 1) return compact.replace(/(.{4})(?=.)/g, '$1 ');
  if (style === 2) return compact.toLowerCase();
  return compact;
}

function ssn(rng: Rng, sep = rng.next() < 0.85 ? '-' : ' '): string {
  let area = rng.int(1, 899);
  if (area === 666) area = 665;
  return `${String(area).padStart(3, '0')}${sep}${String(rng.int(1, 99)).padStart(2, '0')}${sep}${String(rng.int(1, 9999)).padStart(4, '0')}`;
}

function ipv4(rng: Rng): string {
  return `${rng.int(1, 223)}.${rng.int(0, 255)}.${rng.int(0, 255)}.${rng.int(1, 254)}`;
}

function ipv6(rng: Rng): string {
  const group = () => rng.int(0, 0xffff).toString(16);
  const style = rng.int(0, 3);
  if (style === 0) return Array.from({ length: 8 }, group).join(':');
  if (style === 1) return `2001:db8:${group()}::${group()}:${group()}`;
  if (style === 2) return `::ffff:${ipv4(rng)}`;
  return `fe80::${group()}:${group()}:${group()}:${group()}`;
}

function mac(rng: Rng): string {
  const octets = Array.from(rng.bytes(6), (b) => b.toString(16).padStart(2, '0'));
  const style = rng.int(0, 2);
  if (style === 2) return octets.join('-').toUpperCase();
  return octets.join(':');
}

const US_AREAS = [
  201, 206, 212, 213, 303, 305, 312, 404, 415, 503, 512, 615, 617, 646, 702, 703, 713, 718, 808,
  917,
];

function usPhone(rng: Rng): string {
  const a = rng.pick(US_AREAS);
  const e = `${rng.int(2, 9)}${rng.int(0, 9)}${rng.int(2, 9)}`;
  const l = rng.digits(4);
  return rng.pick([
    `(${a}) ${e}-${l}`,
    `${a}-${e}-${l}`,
    `${a}.${e}.${l}`,
    `+1 ${a}-${e}-${l}`,
    `+1 (${a}) ${e}-${l}`,
    `${a}-${e}-${l} x${rng.int(10, 9999)}`,
    `1-${a}-${e}-${l}`,
  ]);
}

const PHONE_REGIONS: readonly CountryCode[] = [
  'GB',
  'DE',
  'FR',
  'ES',
  'IT',
  'NL',
  'SE',
  'CH',
  'AU',
  'JP',
  'IN',
  'BR',
  'MX',
  'PL',
  'IE',
  'BE',
  'AT',
  'DK',
  'NO',
  'FI',
  'PT',
  'ZA',
  'SG',
  'NZ',
];

function foreignPhone(rng: Rng, international: boolean): string {
  const metadata = maxMetadata as MetadataJson;
  for (;;) {
    const region = rng.pick(PHONE_REGIONS);
    const example = getExampleNumber(region, examples, metadata);
    if (example === undefined) continue;
    const national = String(example.nationalNumber);
    const mutated = national.slice(0, -4) + rng.digits(4);
    const parsed = parsePhoneNumberFromString(`+${example.countryCallingCode}${mutated}`, metadata);
    if (!parsed?.isValid()) continue;
    return international ? parsed.formatInternational() : parsed.formatNational();
  }
}

function base58(bytes: Uint8Array): string {
  const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let n = BigInt(`0x${Buffer.from(bytes).toString('hex')}`);
  let out = '';
  while (n > 0n) {
    out = alphabet[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}

function btcBase58(rng: Rng): string {
  const payload = new Uint8Array(21);
  payload[0] = rng.next() < 0.6 ? 0x00 : 0x05;
  payload.set(rng.bytes(20), 1);
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest();
  const check = sha(sha(payload)).subarray(0, 4);
  return base58(Uint8Array.from([...payload, ...check]));
}

const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';

function bech32Polymod(values: readonly number[]): number {
  const gen = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = (((chk & 0x1ffffff) << 5) ^ v) >>> 0;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk = (chk ^ (gen[i] ?? 0)) >>> 0;
  }
  return chk;
}

function btcSegwit(rng: Rng): string {
  const version = rng.next() < 0.6 ? 0 : 1;
  const program = rng.bytes(version === 0 && rng.next() < 0.5 ? 20 : 32);
  const data = [version];
  let acc = 0;
  let bits = 0;
  for (const b of program) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      data.push((acc >>> bits) & 31);
    }
  }
  if (bits > 0) data.push((acc << (5 - bits)) & 31);
  const hrp = [3, 3, 0, 2, 3];
  const mod = bech32Polymod([...hrp, ...data, 0, 0, 0, 0, 0, 0]) ^ (version === 0 ? 1 : 0x2bc830a3);
  const checksum = Array.from({ length: 6 }, (_, i) => (mod >>> (5 * (5 - i))) & 31);
  return `bc1${[...data, ...checksum].map((v) => BECH32_CHARSET[v]).join('')}`;
}

function ethAddress(rng: Rng, checksummed: boolean): string {
  const hex = Buffer.from(rng.bytes(20)).toString('hex');
  if (!checksummed) return `0x${hex}`;
  const hash = keccak256(Buffer.from(hex, 'ascii'));
  let out = '';
  for (let i = 0; i < 40; i++) {
    const nibble = ((hash[i >> 1] ?? 0) >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    const ch = hex[i] ?? '';
    out += nibble >= 8 ? ch.toUpperCase() : ch;
  }
  return `0x${out}`;
}

function b64url(s: string): string {
  return Buffer.from(s).toString('base64url');
}

function jwt(rng: Rng): string {
  const alg = rng.pick(['HS256', 'RS256', 'ES256']);
  const header = b64url(JSON.stringify({ alg, typ: 'JWT' }));
  const payload = b64url(
    JSON.stringify({ sub: rng.digits(8), iat: 1_700_000_000 + rng.int(0, 1e6) }),
  );
  return `${header}.${payload}.${rng.chars(`${ALNUM}-_`, 43)}`;
}

function pem(rng: Rng): string {
  const label = rng.pick([
    'RSA PRIVATE KEY',
    'PRIVATE KEY',
    'EC PRIVATE KEY',
    'OPENSSH PRIVATE KEY',
  ]);
  const lines = Array.from({ length: rng.int(3, 8) }, () => rng.chars(`${ALNUM}+/`, 64));
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----`;
}

function password(rng: Rng): string {
  return rng.pick([
    () =>
      `${rng.pick(['Tr0ub4dor', 'hunter', 'S3cure', 'Winter', 'P@ssw0rd'])}${rng.int(10, 99)}${rng.pick(['!', '#', '&', ''])}`,
    () => rng.chars(`${ALNUM}!#%^*`, rng.int(12, 24)),
  ])();
}

const MONTH_NAMES = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

function birthDate(rng: Rng): string {
  const y = rng.int(1930, 2005);
  const m = rng.int(1, 12);
  const d = rng.int(1, 28);
  const mm = String(m).padStart(2, '0');
  const dd = String(d).padStart(2, '0');
  return rng.pick([
    `${y}-${mm}-${dd}`,
    `${m}/${d}/${y}`,
    `${dd}.${mm}.${y}`,
    `${d} ${MONTH_NAMES[m - 1]} ${y}`,
    `${MONTH_NAMES[m - 1]} ${d}, ${y}`,
  ]);
}

function personName(rng: Rng): string {
  return rng.next() < 0.2
    ? `${rng.pick(FIRST)} ${rng.pick(FIRST)[0]}. ${rng.pick(LAST)}`
    : `${rng.pick(FIRST)} ${rng.pick(LAST)}`;
}

function email(rng: Rng): string {
  const first = ascii(rng.pick(FIRST)).toLowerCase();
  const last = ascii(rng.pick(LAST)).toLowerCase();
  const local = rng.pick([
    `${first}.${last}`,
    `${first}${last}`,
    `${first[0]}${last}`,
    `${first}.${last}+news`,
    `${first}_${rng.int(1, 99)}`,
  ]);
  return `${local}@${rng.pick(DOMAINS)}`;
}

interface Generator {
  type: EntityType;
  value: (rng: Rng) => string;
  templates: readonly string[];
}

const GENERATORS: readonly Generator[] = [
  {
    type: 'EMAIL_ADDRESS',
    value: email,
    templates: [
      'Contact me at {}.',
      'Send the report to {} before Friday.',
      '邮箱：{}。',
      'E-mail: {}',
      'From: Support <{}>',
      'cc ({}) on the thread',
      'Ping {}!',
      'mailto:{}',
    ],
  },
  {
    type: 'PHONE_NUMBER',
    value: (rng) => (rng.next() < 0.4 ? usPhone(rng) : foreignPhone(rng, rng.next() < 0.6)),
    templates: [
      'Call me at {}.',
      'Phone: {}',
      'Mobile: {}',
      'You can reach me on {} after 5pm.',
      'Fax {}',
      'Tel. {}',
      'My cell is {}, text anytime.',
      'Emergency contact: {}',
      'Please call {} to confirm.',
      'Details: {}',
      '{} (preferred)',
    ],
  },
  {
    type: 'CREDIT_CARD',
    value: card,
    templates: [
      'My card is {}.',
      'Card number: {}',
      'Please charge {} for the order.',
      'Visa {} exp 12/27',
      'credit card {} has been blocked',
      'Paid with {} yesterday',
      'card {} 12/27',
    ],
  },
  {
    type: 'IBAN_CODE',
    value: (rng) => iban(rng),
    templates: [
      'IBAN: {}',
      'Please wire the money to {}.',
      'Konto {} bitte prüfen',
      'my iban is {}',
      'Beneficiary account {} (SEPA)',
      'Transfer to {} today',
    ],
  },
  {
    type: 'US_SSN',
    value: (rng) => ssn(rng),
    templates: [
      'SSN: {}',
      'My social security number is {}.',
      'SSN {} on file',
      'Employee record {}, hired 2019',
      'social security no. {}',
      'Record: {}',
    ],
  },
  {
    type: 'IP_ADDRESS',
    value: (rng) => (rng.next() < 0.5 ? ipv4(rng) : ipv6(rng)),
    templates: [
      'Connection from {} refused',
      'Server IP: {}',
      'ping {}',
      'client_ip={}',
      'Blocked address {} after 5 attempts',
      'host [{}] is down',
    ],
  },
  {
    type: 'MAC_ADDRESS',
    value: mac,
    templates: [
      'MAC address {}',
      'Device {} joined the network',
      'bssid={}',
      'ether {} txqueuelen 1000',
    ],
  },
  {
    type: 'AWS_ACCESS_KEY_ID',
    value: (rng) =>
      `${rng.pick(['AKIA', 'ASIA'])}${rng.chars('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16)}`,
    templates: ['export AWS_ACCESS_KEY_ID={}', 'key id {} was rotated', '"AccessKeyId": "{}"'],
  },
  {
    type: 'AWS_SECRET_ACCESS_KEY',
    value: (rng) => {
      for (;;) {
        const v = rng.chars(`${ALNUM}/+`, 40);
        if (
          /[A-Z]/.test(v) &&
          /[a-z]/.test(v) &&
          /\d/.test(v) &&
          !v.startsWith('/') &&
          !v.endsWith('/') &&
          !v.includes('//')
        )
          return v;
      }
    },
    templates: ['aws_secret_access_key = {}', 'AWS secret: {}', 'export AWS_SECRET_ACCESS_KEY={}'],
  },
  {
    type: 'GITHUB_TOKEN',
    value: (rng) =>
      rng.next() < 0.7
        ? `${rng.pick(['ghp', 'gho', 'ghu', 'ghs', 'ghr'])}_${rng.chars(ALNUM, 36)}`
        : `github_pat_${rng.chars(ALNUM, 22)}_${rng.chars(ALNUM, 59)}`,
    templates: [
      'GITHUB_TOKEN={}',
      'use token {} for the API',
      'git clone https://x-access-token:{}@github.com/org/repo',
    ],
  },
  {
    type: 'GITLAB_TOKEN',
    value: (rng) => `glpat-${rng.chars(`${ALNUM}_-`, 20)}`,
    templates: ['PRIVATE-TOKEN: {}', 'gitlab token {} expires soon'],
  },
  {
    type: 'SLACK_TOKEN',
    value: (rng) =>
      `${rng.pick(['xoxb', 'xoxp', 'xoxa', 'xoxr', 'xoxs'])}-${rng.digits(12)}-${rng.digits(13)}-${rng.chars(ALNUM, 24)}`,
    templates: ['SLACK_BOT_TOKEN={}', 'slack: {}'],
  },
  {
    type: 'STRIPE_KEY',
    value: (rng) => `${rng.pick(['sk_live', 'rk_live', 'sk_test'])}_${rng.chars(ALNUM, 24)}`,
    templates: ['STRIPE_SECRET_KEY={}', 'stripe key {} leaked in logs'],
  },
  {
    type: 'GOOGLE_API_KEY',
    value: (rng) => `AIza${rng.chars(`${ALNUM}_-`, 35)}`,
    templates: ['https://maps.googleapis.com/maps/api/js?key={}', 'GOOGLE_API_KEY={}'],
  },
  {
    type: 'JWT',
    value: jwt,
    templates: ['Authorization: Bearer {}', 'session {} expired', 'id_token {}'],
  },
  {
    type: 'PRIVATE_KEY',
    value: pem,
    templates: ['Here is the key:\n{}\nkeep it safe', '{}'],
  },
  {
    type: 'CRYPTO',
    value: (rng) =>
      rng.pick([
        btcBase58,
        btcSegwit,
        (r: Rng) => ethAddress(r, true),
        (r: Rng) => ethAddress(r, false),
      ])(rng),
    templates: ['Send 0.5 BTC to {}', 'ETH wallet: {}', 'Donations: {}', 'withdraw to {} please'],
  },
  {
    type: 'DATE_OF_BIRTH',
    value: birthDate,
    templates: [
      'She was born on {}.',
      'DOB: {}',
      'Date of birth: {}',
      'My birthday is {}',
      'Patient born {} in Lyon',
    ],
  },
  {
    type: 'PERSON',
    value: personName,
    templates: [
      'Name: {}',
      'Dr. {} will see you now.',
      'Mrs. {} called about the invoice.',
      'My name is {} and I need help.',
      'Prof {} approved it',
      'Please forward this to {}.',
      '{} approved the change',
    ],
  },
];

function specialCases(rng: Rng): LabelledText[] {
  const out: LabelledText[] = [];
  for (let i = 0; i < 25; i++) {
    const user = ascii(rng.pick(FIRST)).toLowerCase();
    const pass = rng.chars(ALNUM, rng.int(8, 16));
    const [scheme, host] = rng.pick([
      ['postgres', 'db.internal:5432/prod'],
      ['https', 'api.example.com/v1'],
      ['mongodb+srv', 'cluster0.example.net/app'],
      ['redis', ''],
      ['amqp', 'mq.example.com'],
      ['ftp', 'files.example.org/pub'],
    ] as const);
    const url: Part[] = [
      'DATABASE_URL=',
      `${scheme}://`,
      { type: 'URL_CREDENTIALS', value: `${user}:${pass}` },
      '@',
    ];
    if (host === '') url.push({ type: 'IP_ADDRESS', value: ipv4(rng) }, ':6379/0');
    else url.push(host);
    out.push(compose(url));
  }
  for (let i = 0; i < 40; i++) {
    const value = password(rng);
    const tpl = rng.pick([
      'password={}',
      'DB_PASSWORD="{}"',
      '{"api_key": "{}"}',
      'secret: {}',
      'client_secret={}',
      "pwd = '{}'",
      'Password: {}',
    ]);
    out.push(fill(tpl, 'SECRET', value));
  }
  // Contact blocks with several entities.
  for (let i = 0; i < 30; i++) {
    out.push(
      compose([
        'Name: ',
        { type: 'PERSON', value: personName(rng) },
        '\nEmail: ',
        { type: 'EMAIL_ADDRESS', value: email(rng) },
        '\nPhone: ',
        { type: 'PHONE_NUMBER', value: rng.next() < 0.5 ? usPhone(rng) : foreignPhone(rng, false) },
        '\nIBAN: ',
        { type: 'IBAN_CODE', value: iban(rng) },
        '\nLast login from ',
        { type: 'IP_ADDRESS', value: ipv4(rng) },
      ]),
    );
  }
  return out;
}

function corrupt(rng: Rng, value: string, alphabet: string): string {
  for (;;) {
    const i = rng.int(0, value.length - 1);
    const ch = rng.pick([...alphabet]);
    if (ch !== value[i]) return value.slice(0, i) + ch + value.slice(i + 1);
  }
}

function negatives(rng: Rng): LabelledText[] {
  const texts: string[] = [];
  const add = (n: number, make: () => string) => {
    for (let i = 0; i < n; i++) texts.push(make());
  };
  add(20, () => {
    let bad = luhnComplete(rng, rng.pick(['4', '51', '2221', '6011']), 16);
    bad = bad.slice(0, -1) + String((Number(bad.slice(-1)) + rng.int(1, 9)) % 10);
    return `Card number: ${groupDigits(bad, [4, 4, 4, 4], ' ')}`;
  });
  add(20, () => {
    const good = iban(rng).replace(/ /g, '').toUpperCase();
    const wrong = `${good.slice(0, 2)}${String((Number(good.slice(2, 4)) + rng.int(1, 50)) % 97).padStart(2, '0')}${good.slice(4)}`;
    return rng.next() < 0.5 ? `IBAN: ${wrong}` : `IBAN: ${good.slice(0, -1)}`;
  });
  add(20, () => {
    const bad = rng.pick([
      `000-${rng.int(10, 99)}-${rng.int(1000, 9999)}`,
      `666-${rng.int(10, 99)}-${rng.int(1000, 9999)}`,
      `9${rng.int(10, 99)}-${rng.int(10, 99)}-${rng.int(1000, 9999)}`,
      `${rng.int(100, 665)}-00-${rng.int(1000, 9999)}`,
      `${rng.int(100, 665)}-${rng.int(10, 99)}-0000`,
      '123-45-6789',
      '078-05-1120',
    ]);
    return `SSN: ${bad}`;
  });
  add(15, () =>
    rng.pick([
      `Server IP: 256.${rng.int(0, 255)}.1.9`,
      `IP ${rng.int(1, 223)}.${rng.int(0, 255)}.${rng.int(0, 255)}`,
      `host 10.0.0.${rng.int(256, 999)}`,
      'addr 2001:db8::85a3::7334',
      'addr 12345::1',
      'addr 2001:db8:85a3:0:0:8a2e:370',
    ]),
  );
  add(10, () =>
    rng.pick([
      'MAC 00:1A:2B:3C:4D',
      'MAC 00:1A-2B:3C:4D:5E',
      'MAC 00:00:00:00:00:00',
      'Meeting at 12:30:45 sharp',
    ]),
  );
  add(
    20,
    () =>
      `Meeting at ${rng.int(10, 23)}:${rng.int(10, 59)}:${rng.int(10, 59)} on ${rng.int(2000, 2030)}-${String(rng.int(1, 12)).padStart(2, '0')}-${String(rng.int(1, 28)).padStart(2, '0')}`,
  );
  add(25, () =>
    rng.pick([
      `Revenue was $${rng.int(1, 9)},${rng.digits(3)},${rng.digits(3)}.${rng.digits(2)} in Q3`,
      `Population ${rng.int(1, 9)} ${rng.digits(3)} ${rng.digits(3)} in 2021`,
      `Order ${rng.int(1, 9)}${rng.digits(9)} shipped`,
      'ISBN 978-3-16-148410-0',
      `Version ${rng.int(1, 9)}.${rng.int(0, 20)}.${rng.int(0, 9)} released`,
      `Ticket #${rng.digits(5)} closed`,
      `Invoice ${rng.int(2019, 2024)}-${rng.digits(4)}-${rng.digits(2)} paid`,
      `The build ${rng.digits(8)} passed`,
    ]),
  );
  add(20, () => {
    const kind = rng.int(0, 2);
    if (kind === 0)
      return `BTC ${corrupt(rng, btcBase58(rng), '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz')}`;
    if (kind === 1) return `BTC ${corrupt(rng, btcSegwit(rng), BECH32_CHARSET)}`;
    const good = ethAddress(rng, true);
    const flipped = good.replace(/[a-f]/, (c) => c.toUpperCase());
    return `ETH ${flipped === good ? good.replace(/[A-F]/, (c) => c.toLowerCase()) : flipped}`;
  });
  add(15, () =>
    rng.pick([
      `AKIA${rng.chars(UPPER_DIGITS, 15)} is too short`,
      `ghp_${rng.chars(ALNUM, 20)} is truncated`,
      'sk_live_short',
      `${b64url('{"typ":"JWT"}')}.${b64url('{"sub":1}')}.${rng.chars(ALNUM, 20)}`,
      `eyJ${rng.chars(ALNUM, 20)}.${rng.chars(ALNUM, 20)}.${rng.chars(ALNUM, 20)}`,
      `commit ${rng.chars(HEX, 40)}`,
    ]),
  );
  add(15, () =>
    rng.pick([
      'Forgot your password? Click reset.',
      'password: required',
      'The token: expired yesterday',
      'Set the secret: see the vault docs',
      'api_key: $' + '{API_KEY}',
      'password = "********"',
    ]),
  );
  add(15, () =>
    rng.pick([
      'Capitalized words like Wisdom and Discipline are often mistaken with names.',
      'We met at 12 Oak Dr Springfield yesterday.',
      'Meeting with Product Team on Monday',
      'Excuse me, Sir bot, but I really do not like this tone',
      'The Name field is required.',
    ]),
  );
  add(15, () =>
    rng.pick([
      `The invoice is dated ${birthDate(rng)}.`,
      `Delivery on ${rng.int(2020, 2025)}-0${rng.int(1, 9)}-1${rng.int(0, 9)}`,
      `Release date ${birthDate(rng)}`,
    ]),
  );
  add(15, () =>
    rng.pick([
      'user@localhost',
      'name at example dot com',
      'follow @handle on social',
      'a@b',
      'email me: jane[at]example.com',
      'https://user@example.com/path',
      'https://example.com/a@b',
    ]),
  );
  return texts.map((text) => ({ text, spans: [] }));
}

/** The generated corpus: `perType` positives per generator, special cases and negatives. */
export function generateCorpus(seed = 20_240_604, perType = 40): LabelledText[] {
  const rng = new Rng(seed);
  const out: LabelledText[] = [];
  for (const g of GENERATORS) {
    for (let i = 0; i < perType; i++) out.push(fill(rng.pick(g.templates), g.type, g.value(rng)));
  }
  out.push(...specialCases(rng), ...negatives(rng));
  return out;
}

/**
 * Customer-style records for the throughput benchmark's structured payload: every field but
 * `id`, `plan` and `active` carries PII in about half of the records.
 */
export function generateRecords(seed: number, count: number, notes: readonly string[]): unknown[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, (_, i) => {
    const rich = rng.next() < 0.5;
    return {
      id: 100_000 + i,
      name: rich ? personName(rng) : `user-${i}`,
      email: rich ? email(rng) : null,
      phone: rich ? (rng.next() < 0.5 ? usPhone(rng) : foreignPhone(rng, true)) : null,
      iban: rich && rng.next() < 0.5 ? iban(rng) : null,
      card: rich && rng.next() < 0.3 ? card(rng) : null,
      lastLogin: { ip: ipv4(rng), at: `2024-0${rng.int(1, 9)}-1${rng.int(0, 9)}T10:00:00Z` },
      plan: rng.pick(['free', 'pro', 'team']),
      active: rng.next() < 0.8,
      tags: ['customer', rng.pick(['emea', 'amer', 'apac'])],
      notes: rng.pick(notes),
    };
  });
}
