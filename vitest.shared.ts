import { basename } from 'node:path';
import { defineConfig } from 'vitest/config';

// scripts/run-tests.mjs sets this to collect one JSON report per package for its summary line.
const reportDir = process.env.FLEET_TEST_REPORT_DIR;

/**
 * Shared vitest settings: workspace packages resolve to their TypeScript sources through the
 * `@fleet/source` export condition, so tests never need a prior build.
 */
export const sharedConfig = defineConfig({
  resolve: { conditions: ['@fleet/source'] },
  ssr: { resolve: { conditions: ['@fleet/source'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 20_000,
    hookTimeout: 30_000,
    restoreMocks: true,
    ...(reportDir
      ? {
          reporters: ['default', 'json'],
          outputFile: { json: `${reportDir}/${basename(process.cwd())}.json` },
        }
      : {}),
  },
});
