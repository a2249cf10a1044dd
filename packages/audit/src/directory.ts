/**
 * Creating a configured directory without `mkdir -p`: Node 20's recursive mkdir never returns
 * where a level cannot be created but its parent exists (under /proc, mkdir says ENOENT and
 * Node retries the parent, which exists, then the level again, forever). Kept apart from the
 * journal and the store (node:fs only) so that the CLI uses it without loading the producer's
 * stack (`@fleet/audit/directory`).
 */
import { existsSync, mkdirSync, rmdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Create `dir` (resolved against the cwd) and those of its parents that are missing, one level
 * at a time, like `mkdir -p` but failing at once where a level cannot be created. A level that
 * another process creates meanwhile is taken as it is. Returns the levels it created (absolute,
 * outermost first); none when `dir` is a directory already.
 * @throws the error of the mkdir that failed (ENOENT, EACCES, ENOTDIR where a level is a file,
 *   EEXIST where `dir` is a file), after removing the levels it created before it.
 */
export function makeDirectory(dir: string): string[] {
  const target = resolve(dir);
  const missing: string[] = [];
  for (let level = target; !existsSync(level) && dirname(level) !== level; level = dirname(level))
    missing.unshift(level);
  // mkdir on what exists says EEXIST, as `mkdir -p` does where the target is a file.
  if (missing.length === 0 && !statSync(target).isDirectory()) mkdirSync(target);
  const created: string[] = [];
  try {
    for (const next of missing) {
      if (createLevel(next)) created.push(next);
    }
  } catch (error) {
    for (const made of created.reverse()) {
      try {
        rmdirSync(made);
      } catch {
        // Someone else's files went in meanwhile: theirs now, and the mkdir error is the news.
      }
    }
    throw error;
  }
  return created;
}

/** mkdir one level; false when another process made it a directory first. */
function createLevel(level: string): boolean {
  try {
    mkdirSync(level);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST' && isDirectory(level)) return false;
    throw error;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The one line a service ends its start with when the directory of its audit journal
 * (`AUDIT_JOURNAL`) cannot be created: `dir` and why (`error`, the failed mkdir).
 */
export function journalDirectoryProblem(dir: string, error: unknown): string {
  const why = error instanceof Error ? error.message : String(error);
  return `AUDIT_JOURNAL: cannot create ${dir}, the audit journal's directory (${why}): set AUDIT_JOURNAL to a file in a directory this process can create`;
}
