import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type JsonSchema, keyMismatches } from './schema-keys.ts';

const Service = z.strictObject({
  mode: z.enum(['a', 'b']),
  limits: z.strictObject({ depth: z.number() }).optional(),
  byName: z.record(z.string(), z.strictObject({ on: z.boolean() })).optional(),
  byType: z.strictObject({ A: z.strictObject({ on: z.boolean() }).optional() }).optional(),
  list: z.array(z.strictObject({ id: z.string() })).optional(),
});

const closed = (properties: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  properties,
});
const onOff = closed({ on: { type: 'boolean' } });

/** The chart schema that agrees with `Service`, with `change` applied at the top. */
function chart(change: Record<string, JsonSchema | undefined> = {}): JsonSchema {
  const properties: Record<string, JsonSchema> = {
    mode: { type: 'string' },
    limits: closed({ depth: { type: 'integer' } }),
    byName: { type: 'object', additionalProperties: onOff },
    byType: { $ref: '#/definitions/byType' },
    list: { type: 'array', items: closed({ id: { type: 'string' } }) },
  };
  for (const [key, value] of Object.entries(change)) {
    if (value) properties[key] = value;
    else delete properties[key];
  }
  return closed(properties);
}
const definitions: Record<string, JsonSchema> = {
  byType: closed({ A: onOff }),
};
const mismatches = (node: JsonSchema, chartOwned?: string[]) =>
  keyMismatches({ root: { definitions }, node, service: Service, chartOwned });

describe('keyMismatches', () => {
  it.each<[string, JsonSchema, string[]]>([
    ['agrees', chart(), []],
    [
      'an open object',
      chart({ limits: { type: 'object' } }),
      ['limits: the chart allows any key, the service only depth'],
    ],
    [
      'a key only the chart has',
      chart({ limits: closed({ depth: {}, deep: {} }) }),
      ['limits: the chart allows deep, the service refuses it'],
    ],
    [
      'a key only the service has',
      chart({ list: undefined }),
      [
        '<root>: the service allows list, the chart refuses it',
        'list[0]: the chart allows any key, the service only id',
      ],
    ],
    [
      'an open map value',
      chart({ byName: { type: 'object' } }),
      ['byName.<name>: the chart allows any key, the service only on'],
    ],
    [
      'a map where the service has fixed keys',
      chart({ byType: { type: 'object', additionalProperties: onOff } }),
      ['byType: the chart allows any key, the service only A'],
    ],
    [
      'an open array item',
      chart({ list: { type: 'array' } }),
      ['list[0]: the chart allows any key, the service only id'],
    ],
    [
      'alternatives together',
      chart({
        limits: { anyOf: [{ type: 'integer' }, closed({ depth: {} })] },
      }),
      [],
    ],
  ])('%s', (_label, node, expected) => {
    expect(mismatches(node)).toEqual(expected);
  });

  it('leaves out what the chart writes itself, and everything below it', () => {
    expect(mismatches(chart({ list: undefined }), ['list'])).toEqual([]);
  });
});
