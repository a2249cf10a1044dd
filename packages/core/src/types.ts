/** Public types of the interceptor wire contract, inferred from the schemas in `wire.ts`. */
import type { z } from 'zod';
import type {
  CompatSchema,
  HookSchema,
  InterceptorInfoSchema,
  InterceptorModeSchema,
  InterceptorResultSchema,
  InterceptorTypeSchema,
  InvocationContextSchema,
  InvokeParamsSchema,
  ListInterceptorsResultSchema,
  MutationResultSchema,
  PhaseSchema,
  PrincipalSchema,
  PriorityHintSchema,
  SeveritySchema,
  SuggestionSchema,
  ValidationMessageSchema,
  ValidationResultSchema,
} from './wire.ts';

export type Phase = z.infer<typeof PhaseSchema>;
export type InterceptorType = z.infer<typeof InterceptorTypeSchema>;
export type InterceptorMode = z.infer<typeof InterceptorModeSchema>;
export type Severity = z.infer<typeof SeveritySchema>;
export type Hook = z.infer<typeof HookSchema>;
export type PriorityHint = z.infer<typeof PriorityHintSchema>;
export type Compat = z.infer<typeof CompatSchema>;
export type InterceptorInfo = z.infer<typeof InterceptorInfoSchema>;
export type ListInterceptorsResult = z.infer<typeof ListInterceptorsResultSchema>;
export type Principal = z.infer<typeof PrincipalSchema>;
export type InvocationContext = z.infer<typeof InvocationContextSchema>;
export type InvokeParams = z.infer<typeof InvokeParamsSchema>;
export type ValidationMessage = z.infer<typeof ValidationMessageSchema>;
export type Suggestion = z.infer<typeof SuggestionSchema>;
export type ValidationResult = z.infer<typeof ValidationResultSchema>;
export type MutationResult = z.infer<typeof MutationResultSchema>;
export type InterceptorResult = z.infer<typeof InterceptorResultSchema>;
