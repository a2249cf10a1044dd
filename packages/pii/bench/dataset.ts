/**
 * Locates and loads the Presidio synthetic evaluation set (MIT, Microsoft; never copied into
 * the repository). Looked up at `$PII_DATASET`, else at `shared/data/pii/…` in the package
 * directory or any directory above it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LabelledText, Span } from './score.ts';

const FILE = join('shared', 'data', 'pii', 'presidio_synth_dataset_v2.json');

/** Path of the dataset, or `undefined` when it is not there. */
export function findPresidioDataset(): string | undefined {
  const fromEnv = process.env.PII_DATASET;
  if (fromEnv) return existsSync(fromEnv) ? resolve(fromEnv) : undefined;
  let dir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  for (;;) {
    const candidate = join(dir, FILE);
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

interface PresidioRecord {
  full_text: string;
  spans: Array<{ entity_type: string; start_position: number; end_position: number }>;
}

/** The dataset's records as labelled texts. */
export function loadPresidio(path: string): LabelledText[] {
  const records = JSON.parse(readFileSync(path, 'utf8')) as PresidioRecord[];
  return records.map((r) => ({
    text: r.full_text,
    spans: r.spans.map(
      (s): Span => ({ type: s.entity_type, start: s.start_position, end: s.end_position }),
    ),
  }));
}
