/**
 * A configuration file kept in force while the service runs: parsed at start (a bad file
 * stops the service), re-read when it changes, and a bad edit rejected with the last good
 * value kept. Watches the file's directory (Kubernetes swaps ConfigMap files through a
 * symlink, which a watch on the file misses) and polls as a fallback, since file events
 * are not guaranteed on every filesystem.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';

/** Options for {@link createReloadingFile}. */
export interface ReloadingFileOptions<T> {
  path: string;
  /** Parse the file's text; throw to reject it. */
  parse: (text: string) => T;
  /** Equal values are not reported as a reload (default: never equal). */
  same?: (a: T, b: T) => boolean;
  /** Poll interval as a fallback to file events. Default 2000 ms. */
  pollMs?: number;
  /** A new value is in force (not called for the first load). */
  onReload?: (value: T) => void;
  /** An edit was rejected; the previous value stays in force. */
  onReject?: (error: Error) => void;
}

/** The value in force and its reload state. */
export interface ReloadingFile<T> {
  current(): T;
  /** Re-read now; resolves true when a new value was put in force. */
  reload(): Promise<boolean>;
  status(): { path: string; loadedAt: string; lastError?: string };
  close(): void;
}

/** Load `path` (throws if the first load fails) and keep it current. */
export async function createReloadingFile<T>(
  options: ReloadingFileOptions<T>,
): Promise<ReloadingFile<T>> {
  const { path, parse, same = () => false, pollMs = 2000, onReload, onReject } = options;
  let lastText = await readFile(path, 'utf8');
  let value = parse(lastText);
  let lastMtime = (await stat(path)).mtimeMs;
  let loadedAt = new Date().toISOString();
  let lastError: string | undefined;

  let reloading: Promise<boolean> | undefined;
  const reload = (): Promise<boolean> => {
    reloading ??= (async () => {
      let text: string;
      try {
        text = await readFile(path, 'utf8');
        lastMtime = (await stat(path)).mtimeMs;
      } catch (error) {
        lastError = `cannot read ${path}: ${(error as Error).message}`;
        onReject?.(new Error(lastError));
        return false;
      }
      if (text === lastText) return false;
      lastText = text;
      try {
        const next = parse(text);
        lastError = undefined;
        if (same(next, value)) return false;
        value = next;
        loadedAt = new Date().toISOString();
        onReload?.(value);
        return true;
      } catch (error) {
        lastError = (error as Error).message;
        onReject?.(error as Error);
        return false;
      }
    })().finally(() => {
      reloading = undefined;
    });
    return reloading;
  };

  let debounce: ReturnType<typeof setTimeout> | undefined;
  const schedule = () => {
    if (debounce) clearTimeout(debounce);
    debounce = setTimeout(() => void reload(), 50);
    debounce.unref();
  };
  let watcher: FSWatcher | undefined;
  try {
    const file = basename(path);
    watcher = watch(dirname(path), (_event, name) => {
      if (name === null || name === file || name.startsWith('..')) schedule();
    });
    watcher.on('error', () => undefined);
  } catch {
    watcher = undefined;
  }
  const poll = setInterval(() => {
    stat(path).then(
      (s) => {
        if (s.mtimeMs !== lastMtime) schedule();
      },
      () => undefined,
    );
  }, pollMs);
  poll.unref();

  return {
    current: () => value,
    reload,
    status: () => ({ path, loadedAt, ...(lastError ? { lastError } : {}) }),
    close() {
      watcher?.close();
      clearInterval(poll);
      if (debounce) clearTimeout(debounce);
    },
  };
}
