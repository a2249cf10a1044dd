/**
 * Client-chosen text as a kit service's spans, metrics and logs show it. Whoever passes the
 * bearer check (anyone, when no token is set) picks an invocation's `name`, `event` and
 * `phase`: a made-up value must neither add a metric series nor put its text (a 1 MiB string,
 * an e-mail address) in a span or a log line. So each is shown only when it is one of a known
 * set, and as `other` otherwise; no free text is left that would need the PII engine.
 */
import {
  type InterceptorInfo,
  isKnownMcpMethod,
  JsonRpcCode,
  ProtocolError,
  quoteCut,
} from '@fleet/core';

/** What a value outside its known set is shown as. */
export const OTHER_LABEL = 'other';

/** Longest handler reason a log line quotes before cutting it. */
const MAX_REASON_LENGTH = 256;

/** The interceptor as telemetry shows it: its name when the service has it, else `other`. */
export function interceptorLabel(info: InterceptorInfo | undefined): string {
  return info?.name ?? OTHER_LABEL;
}

/** The phase as telemetry shows it: `request`, `response`, else `other`. */
export function phaseLabel(phase: unknown): string {
  return phase === 'request' || phase === 'response' ? phase : OTHER_LABEL;
}

/**
 * The event as telemetry shows it: itself when it is a known MCP method (`@fleet/core`'s
 * `KNOWN_MCP_METHODS`) or a hook of `info` names it as it is; else `other`. An event that only
 * a wildcard hook (`*`, `tools/*`) matches was made up by the caller.
 */
export function eventLabel(event: unknown, info: InterceptorInfo | undefined): string {
  if (typeof event !== 'string') return OTHER_LABEL;
  if (isKnownMcpMethod(event)) return event;
  if (info?.hooks.some((hook) => hook.events.includes(event))) return event;
  return OTHER_LABEL;
}

/** A handler's failure reason as a log line quotes it: at most 256 characters and the length. */
export function reasonLabel(reason: string): string {
  return quoteCut(reason, MAX_REASON_LENGTH);
}

/**
 * A failed invocation as its span records it: the JSON-RPC code and a fixed message for it.
 * Never the error's own message or stack, which may quote the caller (`Unknown interceptor
 * "<name>"`) or the payload (a handler's error); the caller gets those in the answer.
 */
export function failureLabel(error: unknown): { code: string; message: string } {
  if (!(error instanceof ProtocolError)) return { code: 'Error', message: 'Internal error' };
  const code = String(error.code);
  if (error.code === JsonRpcCode.INVALID_PARAMS) return { code, message: 'Invalid params' };
  if (error.code === JsonRpcCode.INTERNAL_ERROR) {
    const reason = (error.data as { reason?: unknown } | undefined)?.reason;
    const timeout = reason === 'timeout';
    return {
      code,
      message: timeout ? 'Interceptor execution timeout' : 'Interceptor execution failed',
    };
  }
  return { code, message: 'Error' };
}
