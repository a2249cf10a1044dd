import { describe, expect, it } from 'vitest';
import { fleetCommandLine, launchCommand, shellWord } from './hints.ts';

const ROOT_SCRIPT = 'tsx --conditions=@fleet/source packages/cli/src/main.ts';

describe('launchCommand', () => {
  it.each([
    [
      'pnpm fleet',
      { npm_lifecycle_script: `${ROOT_SCRIPT} up`, npm_config_user_agent: 'pnpm/12.4.2 npm/?' },
      '/w/node_modules/tsx/dist/cli.mjs',
      'pnpm fleet',
    ],
    [
      'pnpm start (whose hints name the fleet script)',
      { npm_lifecycle_script: `${ROOT_SCRIPT} up`, npm_config_user_agent: 'pnpm/12.4.2' },
      '/w/packages/cli/src/main.ts',
      'pnpm fleet',
    ],
    [
      'npm run fleet',
      { npm_lifecycle_script: ROOT_SCRIPT, npm_config_user_agent: 'npm/10.8.2 node/v20' },
      '/w/packages/cli/src/main.ts',
      'npm run fleet --',
    ],
    [
      'node on the built script',
      {},
      '/w/packages/cli/dist/main.js',
      'node packages/cli/dist/main.js',
    ],
    ['tsx on the source', {}, '/w/packages/cli/src/main.ts', 'pnpm fleet'],
    ['an installed bin (a link named fleet)', {}, '/usr/local/bin/fleet', 'fleet'],
    [
      "a package manager's shim into node_modules",
      {},
      '/p/node_modules/@fleet/cli/dist/main.js',
      'fleet',
    ],
    [
      'another package script that runs an installed fleet',
      { npm_lifecycle_script: 'fleet up', npm_config_user_agent: 'pnpm/12.4.2' },
      '/p/node_modules/@fleet/cli/dist/main.js',
      'fleet',
    ],
    ['no script at all', {}, undefined, 'fleet'],
  ])('%s: %s', (_, env, script, expected) => {
    expect(launchCommand({ env, script, cwd: '/w' })).toBe(expected);
  });

  it('shows a script outside the working directory by its absolute path, quoted as needed', () => {
    expect(launchCommand({ env: {}, script: '/my cli/dist/main.js', cwd: '/w' })).toBe(
      "node '/my cli/dist/main.js'",
    );
  });
});

describe('fleetCommandLine', () => {
  it('appends --state-dir when given, as one shell word', () => {
    expect(fleetCommandLine('pnpm fleet', 'chain')).toBe('pnpm fleet chain');
    expect(fleetCommandLine('fleet', 'demo', 'tmp/a')).toBe('fleet demo --state-dir tmp/a');
    expect(fleetCommandLine('fleet', 'demo', "it's here")).toBe(
      `fleet demo --state-dir 'it'\\''s here'`,
    );
  });

  it.each([
    ['plain', 'plain'],
    ['/tmp/a-b_c.d', '/tmp/a-b_c.d'],
    ['a b', "'a b'"],
    ['$HOME', "'$HOME'"],
    ['', "''"],
  ])('shellWord(%j) is %s', (text, expected) => {
    expect(shellWord(text)).toBe(expected);
  });
});
