/**
 * `listen` that cannot listen: a `ListenError` naming the host and port and saying what is
 * wrong in words, with Node's code and error kept; `stopOnListenError` in a real child process
 * prints one line naming HOST or PORT, runs the shutdown and exits 1.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ListenError, listen, listenErrorLine } from '../src/serve.ts';

const SERVE = new URL('../src/serve.ts', import.meta.url).href;
const noop = () => undefined;

/** A TCP server holding a port on 127.0.0.1, closed by `await using`. */
async function occupy(): Promise<{ port: number; [Symbol.asyncDispose](): Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    [Symbol.asyncDispose]: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What `listen` rejected with. */
async function listenError(host: string, port: number): Promise<ListenError> {
  const error = await listen(noop, { service: 'test', host, port, announce: false }).then(
    async (listening) => {
      await listening.close();
      throw new Error(`listened on ${listening.url}`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ListenError);
  return error as ListenError;
}

describe('listen errors', () => {
  it('says a port in use is in use, naming host and port', async () => {
    await using held = await occupy();
    const error = await listenError('127.0.0.1', held.port);
    expect(error.message).toBe(
      `cannot listen on 127.0.0.1:${held.port}: the port is in use (EADDRINUSE)`,
    );
    expect(error).toMatchObject({
      code: 'EADDRINUSE',
      host: '127.0.0.1',
      port: held.port,
      setting: 'port',
    });
    expect((error.cause as NodeJS.ErrnoException).code).toBe('EADDRINUSE');
    expect(listenErrorLine(error)).toBe(`PORT: ${error.message}`);
  });

  it.each([
    ['not-a-host!', 'the host name does not resolve (ENOTFOUND)', 'ENOTFOUND'],
    ['8.8.8.8', 'not an address of this machine (EADDRNOTAVAIL)', 'EADDRNOTAVAIL'],
  ])('says what is wrong with host %s', async (host, words, code) => {
    const error = await listenError(host, 0);
    expect(error.message).toBe(`cannot listen on ${host}:0: ${words}`);
    expect(error).toMatchObject({ code, host, port: 0, setting: 'host' });
    expect(listenErrorLine(error)).toBe(`HOST: ${error.message}`);
  });

  it('refuses a port out of range the same way (Node throws it rather than emitting it)', async () => {
    const error = await listenError('127.0.0.1', 70_000);
    expect(error.message).toBe(
      'cannot listen on 127.0.0.1:70000: not a port (0 to 65535) (ERR_SOCKET_BAD_PORT)',
    );
    expect(error.cause).toBeInstanceOf(RangeError);
  });

  it.each([
    [
      'a privileged port',
      '127.0.0.1',
      80,
      { code: 'EACCES' },
      'cannot listen on 127.0.0.1:80: permission denied: a port below 1024 needs root or CAP_NET_BIND_SERVICE (EACCES)',
      'PORT',
    ],
    [
      'EACCES elsewhere',
      '127.0.0.1',
      8080,
      { code: 'EACCES' },
      'cannot listen on 127.0.0.1:8080: permission denied (EACCES)',
      'PORT',
    ],
    [
      'a name server that does not answer',
      'fleet.example',
      8080,
      { code: 'EAI_AGAIN' },
      'cannot listen on fleet.example:8080: the host name could not be resolved now (the name server did not answer) (EAI_AGAIN)',
      'HOST',
    ],
    [
      'an IPv6 host, bracketed',
      '::1',
      8080,
      { code: 'EAFNOSUPPORT' },
      "cannot listen on [::1]:8080: this machine does not support the address's family (EAFNOSUPPORT)",
      'HOST',
    ],
    [
      'a code it has no words for: the error message, and the code',
      '127.0.0.1',
      8080,
      Object.assign(new Error('something odd'), { code: 'EODD' }),
      'cannot listen on 127.0.0.1:8080: something odd (EODD)',
      'HOST/PORT',
    ],
    [
      'a code the error message already says: not twice',
      '127.0.0.1',
      8080,
      Object.assign(new Error('listen EODD: odd'), { code: 'EODD' }),
      'cannot listen on 127.0.0.1:8080: listen EODD: odd',
      'HOST/PORT',
    ],
  ])('words %s', (_what, host, port, cause, message, variable) => {
    const error = new ListenError(host, port, cause);
    expect(error.message).toBe(message);
    expect(error.cause).toBe(cause);
    expect(listenErrorLine(error)).toBe(`${variable}: ${message}`);
  });
});

describe('stopOnListenError', () => {
  it('prints one line naming PORT, runs the shutdown and exits 1', async () => {
    await using held = await occupy();
    const code = `
      import { listen, onShutdown, stopOnListenError } from ${JSON.stringify(SERVE)};
      // What a start-up opened before it listens: it must not keep the process alive.
      const keepAlive = setInterval(() => undefined, 1000);
      const stop = onShutdown(async () => {
        clearInterval(keepAlive);
        process.stderr.write('cleaned up\\n');
      });
      await listen(() => undefined, { service: 'test', port: ${held.port} }).catch(
        stopOnListenError(stop),
      );
    `;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '--eval', code],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once('exit', (exitCode, signal) => done({ code: exitCode, signal })),
    );
    expect(exit, stderr).toEqual({ code: 1, signal: null });
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toEqual([
      `PORT: cannot listen on 127.0.0.1:${held.port}: the port is in use (EADDRINUSE)`,
      JSON.stringify({ level: 'info', msg: 'shutting down', signal: 'cannot listen' }),
      'cleaned up',
    ]);
  });
});
