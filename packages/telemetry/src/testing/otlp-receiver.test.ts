/** The receiver on its own, fed by hand-written OTLP requests. */
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type OtlpReceiver, startOtlpReceiver } from './otlp-receiver.ts';

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

const traceId = '5b8efff798038103d269b633813fc60c';
const body = {
  resourceSpans: [
    {
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] },
      scopeSpans: [
        {
          scope: { name: 'scope' },
          spans: [
            {
              traceId,
              spanId: 'eee19b7ec3c1b174',
              parentSpanId: '',
              name: 'root',
              kind: 2,
              startTimeUnixNano: '1',
              endTimeUnixNano: '2',
              attributes: [
                { key: 's', value: { stringValue: 'x' } },
                { key: 'i', value: { intValue: '42' } },
                { key: 'd', value: { doubleValue: 1.5 } },
                { key: 'b', value: { boolValue: false } },
                {
                  key: 'a',
                  value: { arrayValue: { values: [{ stringValue: 'p' }, { intValue: 1 }] } },
                },
              ],
              status: { code: 2, message: 'bad' },
              events: [
                { name: 'exception', attributes: [{ key: 'k', value: { stringValue: 'v' } }] },
              ],
            },
            {
              // base64 ids, as some encoders send them
              traceId: Buffer.from(traceId, 'hex').toString('base64'),
              spanId: Buffer.from('aaaaaaaaaaaaaaaa', 'hex').toString('base64'),
              parentSpanId: Buffer.from('eee19b7ec3c1b174', 'hex').toString('base64'),
              name: 'child',
            },
          ],
        },
      ],
    },
  ],
};

async function post(url: string, init: RequestInit): Promise<Response> {
  return fetch(url, { method: 'POST', ...init });
}

describe('startOtlpReceiver', () => {
  it('flattens OTLP JSON spans with ids, parents, attributes, status and events', async () => {
    receiver = await startOtlpReceiver();
    expect(receiver.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await post(receiver.tracesUrl, {
      headers: { 'content-type': 'application/json; charset=utf-8', 'x-key': 'k' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({});
    const [root, child] = receiver.spans();
    expect(root).toEqual({
      traceId,
      spanId: 'eee19b7ec3c1b174',
      parentSpanId: undefined,
      name: 'root',
      kind: 2,
      serviceName: 'svc',
      scopeName: 'scope',
      attributes: { s: 'x', i: 42, d: 1.5, b: false, a: ['p', 1] },
      resourceAttributes: { 'service.name': 'svc' },
      status: { code: 2, message: 'bad' },
      events: [{ name: 'exception', attributes: { k: 'v' } }],
      startTimeUnixNano: '1',
      endTimeUnixNano: '2',
    });
    expect(child).toMatchObject({
      traceId,
      spanId: 'aaaaaaaaaaaaaaaa',
      parentSpanId: 'eee19b7ec3c1b174',
      name: 'child',
    });
    expect(receiver.requests()).toEqual([
      expect.objectContaining({ spanCount: 2, headers: expect.objectContaining({ 'x-key': 'k' }) }),
    ]);
  });

  it('accepts gzip bodies', async () => {
    receiver = await startOtlpReceiver();
    const response = await post(receiver.tracesUrl, {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify(body)),
    });
    expect(response.status).toBe(200);
    expect(receiver.spans()).toHaveLength(2);
  });

  it('refuses protobuf with 415, other paths with 404, malformed JSON with 400', async () => {
    receiver = await startOtlpReceiver();
    const protobuf = await post(receiver.tracesUrl, {
      headers: { 'content-type': 'application/x-protobuf' },
      body: new Uint8Array([10, 0]),
    });
    expect(protobuf.status).toBe(415);
    expect((await fetch(`${receiver.url}/v1/metrics`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(receiver.tracesUrl)).status).toBe(404);
    const malformed = await post(receiver.tracesUrl, {
      headers: { 'content-type': 'application/json' },
      body: '{nope',
    });
    expect(malformed.status).toBe(400);
    expect(receiver.spans()).toEqual([]);
  });

  it('waitFor resolves on arrival and rejects with what arrived after the timeout', async () => {
    receiver = await startOtlpReceiver();
    const waiting = receiver.waitFor((spans) => spans.some((s) => s.name === 'child'), 2000);
    await post(receiver.tracesUrl, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect((await waiting).map((s) => s.name)).toEqual(['root', 'child']);
    await expect(receiver.waitFor((spans) => spans.length > 5, 50)).rejects.toThrow(
      'OTLP receiver: condition not met within 50 ms (spans: root, child)',
    );
    receiver.clear();
    expect(receiver.spans()).toEqual([]);
    expect(receiver.requests()).toEqual([]);
  });

  it('closes with await using', async () => {
    let url = '';
    {
      await using scoped = await startOtlpReceiver();
      url = scoped.tracesUrl;
    }
    await expect(fetch(url, { method: 'POST' })).rejects.toThrow();
  });
});
