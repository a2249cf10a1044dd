import { describe, expect, it } from 'vitest';
import { createPiiEngine, type EntityType } from '../index.ts';
import { isSecretKeyName } from './assignment.ts';
import { isJwt } from './jwt.ts';

// Test secrets are assembled at run time so that no credential-shaped literal sits in the
// repository (secret scanners would flag it).
const chars = (n: number, seed = 7) => {
  const a = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += a[(i * seed + 3) % a.length];
  return s;
};
const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: '42' })}.${chars(43)}`;
const pemLabel = ['RSA', 'PRIVATE', 'KEY'].join(' ');
const pem = `-----BEGIN ${pemLabel}-----\n${chars(64)}\n${chars(64, 11)}\n-----END ${pemLabel}-----`;
const awsId = ['AKIA', 'IOSFODNN7EXAMPLE'].join('');
const awsSecret = ['wJalrXUtnFEMI', '/K7MDENG/bPxRfiCYEXAMPLEKEY'].join('');
const ghp = `${'ghp'}_${chars(36)}`;
const pat = `${'github'}_pat_${chars(22)}_${chars(59, 11)}`;
const glpat = `${'glpat'}-${chars(20)}`;
const slack = `${'xoxb'}-123456789012-1234567890123-${chars(24)}`;
const stripe = `${'sk'}_${'live'}_${chars(24)}`;
const google = `${'AIza'}${chars(35)}`;
const openaiProject = `${'sk'}-proj-${chars(74)}_${chars(20, 11)}-${chars(56, 13)}`;
const openaiService = `${'sk'}-svcacct-${chars(40)}`;
const openaiLegacy = `${'sk'}-${chars(20)}T3BlbkFJ${chars(20, 11)}`;
const bearer = `${chars(24)}.${chars(8, 11)}`;

const engine = createPiiEngine();
const found = (text: string, type: EntityType, key?: string) =>
  engine
    .detect(text, { key })
    .filter((d) => d.type === type)
    .map((d) => text.slice(d.start, d.end));

describe('provider credentials', () => {
  it.each([
    [`export AWS_ACCESS_KEY_ID=${awsId}`, 'AWS_ACCESS_KEY_ID', awsId],
    [`aws_secret_access_key = ${awsSecret}`, 'AWS_SECRET_ACCESS_KEY', awsSecret],
    [`GITHUB_TOKEN=${ghp}`, 'GITHUB_TOKEN', ghp],
    [`token ${pat} works`, 'GITHUB_TOKEN', pat],
    [`PRIVATE-TOKEN: ${glpat}`, 'GITLAB_TOKEN', glpat],
    [`slack ${slack}`, 'SLACK_TOKEN', slack],
    [`key ${stripe}.`, 'STRIPE_KEY', stripe],
    [`https://maps.example.com/api?key=${google}`, 'GOOGLE_API_KEY', google],
    [`Authorization: Bearer ${jwt}`, 'JWT', jwt],
    [`git clone https://x-access-token:${ghp}@github.com/o/r`, 'GITHUB_TOKEN', ghp],
    [`OPENAI_API_KEY=${openaiProject}`, 'OPENAI_API_KEY', openaiProject],
    [`use ${openaiService} for the batch job`, 'OPENAI_API_KEY', openaiService],
    [`openai.api_key = "${openaiLegacy}"`, 'OPENAI_API_KEY', openaiLegacy],
    [`Authorization: Bearer ${bearer}`, 'SECRET', bearer],
    [`curl -H "Authorization: Bearer ${chars(40)}" https://api.example.com`, 'SECRET', chars(40)],
    [`the header was bearer ${openaiService}`, 'OPENAI_API_KEY', openaiService],
  ] as const)('finds %#: %s', (text, type, value) => {
    expect(found(text, type)).toEqual([value]);
  });

  it.each([
    [`${awsId.slice(0, -1)} is too short`, 'AWS_ACCESS_KEY_ID'],
    [`${awsSecret} alone`, 'AWS_SECRET_ACCESS_KEY'],
    [`aws key ${'a1b2c3d4e5'.repeat(4)}`, 'AWS_SECRET_ACCESS_KEY'],
    [`${ghp.slice(0, 20)} truncated`, 'GITHUB_TOKEN'],
    ['sk_live_short', 'STRIPE_KEY'],
    [`${b64url({ typ: 'JWT' })}.${b64url({ sub: 1 })}.${chars(20)}`, 'JWT'],
    [`eyJ${chars(20)}.${chars(20)}.${chars(20)}`, 'JWT'],
    [`${b64url({ alg: 'HS256' })}.${b64url({ sub: 1 })}.`, 'JWT'],
    ['sk-learn and sk-proj-short are not keys', 'OPENAI_API_KEY'],
    [`task-${chars(40)} is an id`, 'OPENAI_API_KEY'],
    [`sk-${'abcdefgh'.repeat(5)} has no digit`, 'OPENAI_API_KEY'],
    [`sk-${'abcd1234'.repeat(5)} has one case`, 'OPENAI_API_KEY'],
    ['the bearer of this letter, the Bearer authentication scheme', 'SECRET'],
    ['Authorization: Bearer YOUR_ACCESS_TOKEN_HERE', 'SECRET'],
    ['Authorization: Bearer <token>', 'SECRET'],
    ['Authorization: Bearer $' + '{TOKEN}', 'SECRET'],
    ['a bearer-token-authentication-flow', 'SECRET'],
  ] as const)('ignores %#: %s', (text, type) => {
    expect(found(text, type)).toEqual([]);
  });

  it('accepts an unsigned JWT only with alg none', () => {
    expect(isJwt(`${b64url({ alg: 'none' })}.${b64url({ sub: 1 })}.`)).toBe(true);
    expect(isJwt(`${b64url({ alg: 'HS256' })}.${b64url({ sub: 1 })}.`)).toBe(false);
  });
});

describe('PRIVATE_KEY', () => {
  it('finds a whole PEM block', () => {
    expect(found(`key:\n${pem}\nbye`, 'PRIVATE_KEY')).toEqual([pem]);
  });

  it('finds a block cut before its END line', () => {
    const cut = pem.slice(0, pem.indexOf('-----END') - 1);
    expect(found(`${cut}\n\n`, 'PRIVATE_KEY')).toEqual([cut]);
  });

  it('ignores public keys and certificates', () => {
    expect(
      found('-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----', 'PRIVATE_KEY'),
    ).toEqual([]);
  });
});

describe('SECRET assignments', () => {
  it.each([
    ['password=hunter2!', 'hunter2!'],
    ['DB_PASSWORD="s3cr3t-pa55"', 's3cr3t-pa55'],
    ['{"api_key": "abcd1234efgh"}', 'abcd1234efgh'],
    ['client_secret: 9f8e7d6c5b4a', '9f8e7d6c5b4a'],
    ["pwd = 'correct horse'", 'correct horse'],
    ['dbPassword: Tr0ub4dor&3', 'Tr0ub4dor'],
    ['Password: correcthorsebattery', 'correcthorsebattery'],
  ])('finds %j', (text, value) => {
    expect(found(text, 'SECRET')).toEqual([value]);
  });

  it.each([
    'password: required',
    'Forgot your password? Click reset.',
    'The token: expired yesterday',
    'api_key: $' + '{API_KEY}',
    'password = "********"',
    'bypass: 12345678',
    'compass: north-by-northwest',
    'next_page_token=abc123def',
    'password=[SECRET]',
    'secret: see',
  ])('ignores %j', (text) => {
    expect(found(text, 'SECRET')).toEqual([]);
  });

  it.each([
    ['password', true],
    ['db_pass', true],
    ['apiKey', true],
    ['X-Api-Key', true],
    ['clientSecret', true],
    ['Authorization', true],
    ['access_token', true],
    ['next_page_token', false],
    ['bypass', false],
    ['max_tokens', false],
    ['email', false],
  ])('isSecretKeyName(%s) = %s', (key, secret) => {
    expect(isSecretKeyName(key)).toBe(secret);
  });

  it('makes the whole value under a credential-named key a SECRET', () => {
    expect(found('my dog is called Rex', 'SECRET', 'password')).toEqual(['my dog is called Rex']);
    expect(found('my dog is called Rex', 'SECRET', 'comment')).toEqual([]);
    expect(found('***', 'SECRET', 'password')).toEqual([]);
  });
});

describe('AWS secret windows', () => {
  const engine = createPiiEngine();
  const secret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
  const found = (text: string) =>
    engine
      .detect(text)
      .filter((d) => d.type === 'AWS_SECRET_ACCESS_KEY')
      .map((d) => text.slice(d.start, d.end));

  it.each([
    [`aws secret ${secret}`, [secret]],
    [`AWS ${'x '.repeat(70)}key ${secret}`, [secret]],
    // Beyond 200 characters of the word, the value is not looked at.
    [`aws ${'x'.repeat(200)} key ${secret}`, []],
    // Windows that overlap are one: the value at 180–220 is in neither the window of
    // "secret" (0–206) nor that of "aws" (200–603) alone, but in their union.
    [`secret ${'x '.repeat(84)} key ${secret} ${'y '.repeat(89)} aws`, [secret]],
    [`secret ${'x '.repeat(84)} key ${secret} ${'y '.repeat(93)} aws`, []],
    [`key ${secret} ${'z'.repeat(150)} Secret`, [secret]],
    // Longer or shorter base64 runs, or one followed by `=`, are not keys.
    [`aws key ${secret}A`, []],
    [`aws key ${secret}=`, []],
    [`aws key ${secret.slice(1)}`, []],
  ])('%#', (text, want) => {
    expect(found(text)).toEqual(want);
  });
});
