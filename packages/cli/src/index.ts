/**
 * @fleet/cli: the `fleet` command as a library (`up`, `demo`, `stdio`, `register`,
 * `unregister`, `services`, `chain`, `new interceptor`, `audit`, `pins`), for tests and embedding.
 */

export type {
  AdminClient,
  AdminClientOptions,
  AdminInterceptorInfo,
  ChainEntry,
  ChainView,
  RegisteredService,
  RegisterRequest,
  ServiceEntry,
} from './admin-client.ts';
export { createAdminClient } from './admin-client.ts';
export type { CommandContext } from './context.ts';
export {
  createCommandContext,
  DEFAULT_ORCHESTRATOR_URL,
  DEFAULT_POLICY_URL,
} from './context.ts';
export { CUSTOMERS, createDemoServer, startDemoBackend } from './demo/backend.ts';
export type { CliErrorCode, CliErrorOptions } from './errors.ts';
export { CLI_ERROR_CODES, CliError } from './errors.ts';
export type {
  FleetEvents,
  FleetService,
  LocalFleet,
  LocalFleetOptions,
} from './fleet/local-fleet.ts';
export { checkRedis, FLEET_SERVICES, REPO_ROOT, startLocalFleet } from './fleet/local-fleet.ts';
export type { OverrideAssignment } from './overrides.ts';
export { buildOverrides, parseOverrideAssignment } from './overrides.ts';
export type {
  PinsView,
  PolicyClient,
  PolicyClientOptions,
  ToolDriftView,
  ToolPinView,
} from './policy-client.ts';
export { createPolicyClient } from './policy-client.ts';
export type { CommandModule } from './program.ts';
export {
  CLI_VERSION,
  COMMAND_MODULES,
  createProgram,
  runProgram,
  USAGE_EXIT_CODE,
} from './program.ts';
export type { ScaffoldOptions, ScaffoldResult } from './scaffold.ts';
export {
  INTERCEPTOR_TEMPLATES_DIR,
  RESERVED_NAMES,
  renderTemplate,
  scaffoldInterceptor,
  validateInterceptorName,
} from './scaffold.ts';
export type { TableOptions } from './table.ts';
export { formatTable } from './table.ts';
export type { CliIO, GlobalOptions, InterceptorKind } from './types.ts';
