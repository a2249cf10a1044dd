import { describe, expect, it } from 'vitest';
import { formatTable } from './table.ts';

describe('formatTable', () => {
  it.each([
    {
      name: 'pads every column to its widest cell, two spaces apart',
      headers: ['NAME', 'TYPE'],
      rows: [
        ['pii-redactor', 'mutation'],
        ['guard', 'validation'],
      ],
      options: {},
      expected: 'NAME          TYPE\npii-redactor  mutation\nguard         validation\n',
    },
    {
      name: 'right-aligns the columns asked for',
      headers: ['NAME', 'PRIORITY'],
      rows: [
        ['a', '5'],
        ['b', '-100'],
      ],
      options: { align: ['left', 'right'] as const },
      expected: 'NAME  PRIORITY\na            5\nb         -100\n',
    },
    {
      name: 'leaves no trailing spaces and fills missing cells',
      headers: ['A', 'B', 'C'],
      rows: [['long value'], ['x', 'y', '']],
      options: {},
      expected: 'A           B  C\nlong value\nx           y\n',
    },
    {
      name: 'keeps each row on one line',
      headers: ['NOTE'],
      rows: [['two\n  lines']],
      options: { gap: 1 },
      expected: 'NOTE\ntwo lines\n',
    },
    {
      name: 'prints only the header without rows',
      headers: ['ID', 'URL'],
      rows: [],
      options: {},
      expected: 'ID  URL\n',
    },
  ])('$name', ({ headers, rows, options, expected }) => {
    expect(formatTable(headers, rows, options)).toBe(expected);
  });
});
