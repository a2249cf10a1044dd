import { describe, expect, it } from 'vitest';
import { checkMigrations, MIGRATIONS } from './migrations.ts';

describe('migrations', () => {
  it('are strictly ascending, start at 1 and have names', () => {
    expect(() => checkMigrations(MIGRATIONS)).not.toThrow();
    expect(MIGRATIONS[0]?.version).toBe(1);
    for (const migration of MIGRATIONS) expect(migration.name).toMatch(/^[a-z0-9_]+$/);
  });

  it('create the table and every index the queries rely on', () => {
    const sql = MIGRATIONS.map((m) => m.sql).join('\n');
    expect(sql).toContain('CREATE TABLE audit_records');
    for (const column of ['trace_id', 'target', 'principal_id', 'decision', 'event'])
      expect(sql).toMatch(new RegExp(`CREATE INDEX \\w+ ON audit_records \\(${column}\\b`));
    expect(sql).toMatch(/ON audit_records \(ts DESC, id DESC\)/);
    expect(sql).toMatch(/USING gin \(interceptors\)/);
  });

  it.each([
    [[{ version: 1 }, { version: 1 }]],
    [[{ version: 2 }, { version: 1 }]],
    [[{ version: 0 }]],
    [[{ version: 1.5 }]],
  ])('refuses versions %j', (versions) => {
    expect(() => checkMigrations(versions.map((v) => ({ ...v, name: 'x', sql: '' })))).toThrow(
      /ascending/,
    );
  });
});
