#!/usr/bin/env node
/**
 * Runs every workspace package's `test` script in turn (vitest; all of them, even after one
 * fails), each writing a JSON report,
 * then prints one closing line `N passed, N failed[, N skipped]` over all of them.
 * Exits non-zero when any package fails or no test ran at all.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const reportDir = mkdtempSync(join(tmpdir(), 'fleet-tests-'));
// --no-bail: a failing package does not hide the results of the packages after it.
const run = spawnSync('pnpm', ['-r', '--workspace-concurrency=1', '--no-bail', 'run', 'test'], {
  stdio: 'inherit',
  env: { ...process.env, FLEET_TEST_REPORT_DIR: reportDir },
});

let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of readdirSync(reportDir)) {
  const report = JSON.parse(readFileSync(join(reportDir, file), 'utf8'));
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
}
rmSync(reportDir, { recursive: true, force: true });

const suiteFailed = run.status !== 0;
if (suiteFailed && failed === 0) failed = 1; // a package failed outside its tests (e.g. a crash)
console.log(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(suiteFailed || passed === 0 ? 1 : 0);
