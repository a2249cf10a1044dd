/**
 * The policy in force, reloaded when its file changes (the kit's reloading file): a bad
 * edit is rejected with a clear error and the last good policy stays in force.
 */
import { createReloadingFile } from '@fleet/interceptor-kit';
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
  const { path, pollMs, events } = options;
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
  const file = await createReloadingFile({
    path,
    parse: (text) => compilePolicy(text, { sourceName: path }),
    same: (a, b) => a.fingerprint === b.fingerprint,
    ...(pollMs === undefined ? {} : { pollMs }),
    onReload: (policy) => events.loaded(policy, false),
    onReject: (error) => events.rejected(error),
  });
  events.loaded(file.current(), true);
  return {
    current: () => file.current(),
    reload: () => file.reload(),
    status: () => ({ ...file.status(), fingerprint: file.current().fingerprint }),
    close: () => file.close(),
  };
}
