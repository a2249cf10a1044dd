import { describe, expect, it } from 'vitest';
import * as policy from './index.ts';

describe('public surface', () => {
  it('exports exactly these values', () => {
    expect(Object.keys(policy).sort()).toEqual([
      'DEFAULT_POLICY_EVENTS',
      'FILTERABLE_LIST_EVENTS',
      'PinningSchema',
      'PolicyDocumentSchema',
      'PolicyLoadError',
      'RateLimitSchema',
      'RuleSchema',
      'allowAllPolicy',
      'compilePolicy',
      'couldEverAllow',
      'evaluate',
      'explain',
      'filterListResult',
      'filterPromptsList',
      'filterResourcesList',
      'filterToolsList',
      'formatPolicyIssue',
      'matchRateLimits',
      'parseDuration',
      'policyInputOf',
    ]);
  });
});
