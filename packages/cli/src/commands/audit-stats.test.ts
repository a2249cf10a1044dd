import { describe, expect, it } from 'vitest';
import { listedNote, STATS_ROWS_SHOWN } from './audit-stats.ts';

describe('how many of the busiest tools the stats show', () => {
  it.each([
    [0, 'tools: none'],
    [1, 'tools: 1, all shown'],
    [STATS_ROWS_SHOWN, `tools: ${STATS_ROWS_SHOWN}, all shown`],
    [23, `tools: top ${STATS_ROWS_SHOWN} of 23 shown (--json has all)`],
    [50, `tools: top ${STATS_ROWS_SHOWN} of 50 or more shown (--json has the 50 busiest)`],
  ])('%i listed: %s', (listed, note) => {
    expect(listedNote('tools', listed)).toBe(note);
  });
});
