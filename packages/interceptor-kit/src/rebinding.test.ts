/**
 * The shared DNS-rebinding rule: loopback names, allowed hosts (with or without the port) and
 * origins, and the two Host policies (every connection for the orchestrator, loopback
 * connections only for kit services).
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { isLoopbackName, type RebindingGuardOptions, rebindingGuard } from './rebinding.ts';

/** A request with `headers` that arrived on `localAddress` (loopback unless said otherwise). */
function request(
  headers: { host?: string; origin?: string },
  localAddress = '127.0.0.1',
): IncomingMessage {
  return { headers, socket: { localAddress } } as unknown as IncomingMessage;
}

const HOST_CHECKS: RebindingGuardOptions['hostCheck'][] = ['always', 'loopback-connections'];

describe('isLoopbackName', () => {
  it.each([
    ['localhost', true],
    ['LOCALHOST', true],
    ['127.0.0.1', true],
    ['127.0.0.2', true],
    ['127.255.10.1', true],
    ['::1', true],
    ['[::1]', true],
    ['0.0.0.0', false],
    ['::', false],
    ['[::]', false],
    ['10.0.0.5', false],
    ['127.0.0.1.evil.example', false],
    ['localhost.evil.example', false],
    ['', false],
  ])('%s → %s', (name, loopback) => {
    expect(isLoopbackName(name)).toBe(loopback);
  });
});

describe.each(HOST_CHECKS)(
  'rebindingGuard, hostCheck %s, on a loopback connection',
  (hostCheck) => {
    it.each([
      'localhost',
      'LOCALHOST:8080',
      '127.0.0.1:8080',
      '127.0.0.2:8080',
      '[::1]:8080',
      '[::1]',
    ])('serves the loopback Host %s', (host) => {
      expect(rebindingGuard({ hostCheck })(request({ host }))).toBeUndefined();
    });

    it('refuses a foreign Host, naming it', () => {
      const guard = rebindingGuard({ hostCheck });
      expect(guard(request({ host: 'evil.example:8080' }))).toBe(
        'Forbidden: Host "evil.example:8080" is not allowed',
      );
      expect(guard(request({ host: '127.0.0.1.evil.example' }))).toBeDefined();
      expect(guard(request({ host: '192.0.2.1:8080' }))).toBeDefined();
    });

    it('serves an allowed host name on any port, in any case', () => {
      const guard = rebindingGuard({ hostCheck, allowedHosts: ['Gw.Internal'] });
      for (const host of ['gw.internal', 'GW.INTERNAL:8080', 'gw.internal:9000'])
        expect(guard(request({ host })), host).toBeUndefined();
      expect(guard(request({ host: 'other.internal:8080' }))).toBe(
        'Forbidden: Host "other.internal:8080" is not allowed',
      );
    });

    it('serves an allowed host:port on that port only', () => {
      const guard = rebindingGuard({ hostCheck, allowedHosts: ['gw.internal:8443'] });
      expect(guard(request({ host: 'GW.internal:8443' }))).toBeUndefined();
      expect(guard(request({ host: 'gw.internal:9000' }))).toBeDefined();
      expect(guard(request({ host: 'gw.internal' }))).toBeDefined();
    });

    it.each(['not a url', 'null', 'http://evil.example', 'https://127.0.0.1.evil.example'])(
      'refuses the Origin %s, naming it',
      (origin) => {
        expect(rebindingGuard({ hostCheck })(request({ host: 'localhost', origin }))).toBe(
          `Forbidden: Origin "${origin}" is not allowed`,
        );
      },
    );

    it.each([
      'http://localhost:6274',
      'HTTP://LOCALHOST',
      'http://127.0.0.2:3000',
      'http://[::1]:3000',
    ])('serves the loopback Origin %s', (origin) => {
      expect(rebindingGuard({ hostCheck })(request({ host: 'localhost', origin }))).toBeUndefined();
    });

    it('serves an allowed Origin (any case, configured with a trailing slash), not its neighbours', () => {
      const guard = rebindingGuard({
        hostCheck,
        allowedOrigins: ['https://Console.Example.com/'],
      });
      expect(guard(request({ origin: 'https://console.example.com', host: 'localhost' }))).toBe(
        undefined,
      );
      for (const origin of ['https://console.example.com:8443', 'http://console.example.com'])
        expect(guard(request({ host: 'localhost', origin })), origin).toBeDefined();
    });

    it('without checkOrigin, looks at the Host alone', () => {
      const guard = rebindingGuard({ hostCheck, checkOrigin: false });
      expect(guard(request({ host: 'localhost', origin: 'https://evil.example' }))).toBeUndefined();
      expect(guard(request({ host: 'evil.example', origin: 'https://evil.example' }))).toBe(
        'Forbidden: Host "evil.example" is not allowed',
      );
    });
  },
);

describe('rebindingGuard, hostCheck always', () => {
  const guard = rebindingGuard({ hostCheck: 'always' });

  it('checks the Host on a connection to any address', () => {
    expect(guard(request({ host: 'evil.example' }, '10.0.0.5'))).toBe(
      'Forbidden: Host "evil.example" is not allowed',
    );
  });

  it('refuses a request without a Host', () => {
    expect(guard(request({}))).toBe('Forbidden: Host "" is not allowed');
  });
});

describe('rebindingGuard, hostCheck loopback-connections', () => {
  const guard = rebindingGuard({ hostCheck: 'loopback-connections' });

  it('checks the Host on IPv4, IPv4-mapped and IPv6 loopback connections', () => {
    for (const address of ['127.0.0.1', '127.0.0.2', '::ffff:127.0.0.1', '::1'])
      expect(guard(request({ host: 'evil.example' }, address)), address).toBe(
        'Forbidden: Host "evil.example" is not allowed',
      );
  });

  it('serves any Host on another address, and a request without a Host', () => {
    for (const address of ['10.0.0.5', '::ffff:10.0.0.5', 'fe80::1'])
      expect(guard(request({ host: 'pii-redactor.fleet.svc:8081' }, address))).toBeUndefined();
    expect(guard(request({}))).toBeUndefined();
  });

  it('still checks the Origin on another address', () => {
    expect(guard(request({ host: 'svc', origin: 'http://evil.example' }, '10.0.0.5'))).toBe(
      'Forbidden: Origin "http://evil.example" is not allowed',
    );
  });
});
