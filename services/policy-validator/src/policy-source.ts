/**
 * The policy in force, reloaded when its file changes: a bad edit is rejected with a clear
 * error and the last good policy stays in force. Watches the file's directory (Kubernetes
 * swaps ConfigMap files through a symlink, which a file watch misses) and also polls, since
 * file events are not guaranteed on every filesystem.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { allowAllPolicy, type CompiledPolicy, compilePolicy } from '@fleet/policy';

/** What the source reports. */
export interface PolicySourceEvents {
  loaded(policy: CompiledPolicy, first: boolean): void;
  rejected(error: Error): void;
}

/** Options for {@link createPolicySource}. */
export interface PolicySourceOptions {
  /** The policy file; undefined = allow everything. */
  path?: string | undefined;
  /** Poll interval as a fallback to file events. Default 2000 ms. */
  pollMs?: number;
  events: PolicySourceEvents;
}

/** The current policy and its reload state. */
export interface PolicySource {
  current(): CompiledPolicy;
  /** Re-read the file now; resolves true when a new policy was put in force. */
  reload(): Promise<boolean>;
  status(): { path?: string; fingerprint: string; loadedAt: string; lastError?: string };
  close(): void;
}

/**
 * Load the policy at `path` (throws on a bad initial file: a service must not start with a
 * policy it cannot read) and keep it current.
 */
export async function createPolicySource(options: PolicySourceOptions): Promise<PolicySource> {
  const { path, pollMs = 2000, events } = options;
  if (path === undefined) {
    const policy = allowAllPolicy();
    const loadedAt = new Date().toISOString();
    events.loaded(policy, true);
    return {
      current: () => policy,
      reload: async () => false,
      status: () => ({ fingerprint: policy.fingerprint, loadedAt }),
      close: () => undefined,
    };
  }
  let policy = compilePolicy(await readFile(path, 'utf8'), { sourceName: path });
  let loadedAt = new Date().toISOString();
  let lastError: string | undefined;
  let lastText: string | undefined;
  let lastMtime = (await stat(path)).mtimeMs;
  events.loaded(policy, true);

  let reloading: Promise<boolean> | undefined;
  const reload = (): Promise<boolean> => {
    reloading ??= (async () => {
      let text: string;
      try {
        text = await readFile(path, 'utf8');
        lastMtime = (await stat(path)).mtimeMs;
      } catch (error) {
        lastError = `cannot read ${path}: ${(error as Error).message}`;
        events.rejected(new Error(lastError));
        return false;
      }
      if (text === lastText) return false;
      lastText = text;
      try {
        const next = compilePolicy(text, { sourceName: path });
        if (next.fingerprint === policy.fingerprint) return false;
        policy = next;
        loadedAt = new Date().toISOString();
        lastError = undefined;
        events.loaded(policy, false);
        return true;
      } catch (error) {
        lastError = (error as Error).message;
        events.rejected(error as Error);
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
    current: () => policy,
    reload,
    status: () => ({
      path,
      fingerprint: policy.fingerprint,
      loadedAt,
      ...(lastError ? { lastError } : {}),
    }),
    close() {
      watcher?.close();
      clearInterval(poll);
      if (debounce) clearTimeout(debounce);
    },
  };
}
