/**
 * What a mutated payload must still be: the governed method's params (request phase) or
 * result (response phase), checked with the MCP SDK's own schemas. A mutation that breaks
 * the shape is a failure of that mutator and is never passed on.
 */
import type { ChainStep, Phase } from '@fleet/core';
import {
  CallToolRequestParamsSchema,
  CallToolResultSchema,
  CompleteResultSchema,
  GetPromptRequestParamsSchema,
  GetPromptResultSchema,
  ListPromptsResultSchema,
  ListResourcesResultSchema,
  ListResourceTemplatesResultSchema,
  ListToolsResultSchema,
  PaginatedRequestParamsSchema,
  ReadResourceRequestParamsSchema,
  ReadResourceResultSchema,
} from '@modelcontextprotocol/sdk/types.js';

interface Checkable {
  safeParse(value: unknown): {
    success: boolean;
    error?: { issues: Array<{ path: PropertyKey[]; message: string }> };
  };
}

const SCHEMAS: Record<string, { request?: Checkable; response?: Checkable }> = {
  'tools/call': { request: CallToolRequestParamsSchema, response: CallToolResultSchema },
  'tools/list': { request: PaginatedRequestParamsSchema, response: ListToolsResultSchema },
  'prompts/get': { request: GetPromptRequestParamsSchema, response: GetPromptResultSchema },
  'prompts/list': { request: PaginatedRequestParamsSchema, response: ListPromptsResultSchema },
  'resources/read': {
    request: ReadResourceRequestParamsSchema,
    response: ReadResourceResultSchema,
  },
  'resources/list': { request: PaginatedRequestParamsSchema, response: ListResourcesResultSchema },
  'resources/templates/list': {
    request: PaginatedRequestParamsSchema,
    response: ListResourceTemplatesResultSchema,
  },
  'completion/complete': { response: CompleteResultSchema },
};

/** The payload check for `method`, in the shape `runChain` takes. */
export function resultValidator(
  method: string,
): ((payload: unknown, step: ChainStep, phase: Phase) => string | undefined) | undefined {
  const schemas = SCHEMAS[method];
  if (schemas === undefined) {
    return (payload) =>
      typeof payload === 'object' && payload !== null && !Array.isArray(payload)
        ? undefined
        : 'payload must be an object';
  }
  return (payload, _step, phase) => {
    const schema = schemas[phase];
    if (schema === undefined) return undefined;
    const parsed = schema.safeParse(payload);
    if (parsed.success) return undefined;
    const issue = parsed.error?.issues[0];
    return issue
      ? `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`
      : 'does not match the method schema';
  };
}
