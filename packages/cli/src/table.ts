/** Aligned plain-text tables for people (scripts use `--json`). */

/** Options for {@link formatTable}. */
export interface TableOptions {
  /** Per column; default `left`. Numbers read best `right`. */
  align?: ReadonlyArray<'left' | 'right'>;
  /** Spaces between columns. Default 2. */
  gap?: number;
}

/**
 * Lay out `rows` under `headers` in aligned columns, one line each, ending in a newline.
 * Cells are single-line (newlines become spaces); no line has trailing spaces.
 */
export function formatTable(
  headers: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  options: TableOptions = {},
): string {
  const { align = [], gap = 2 } = options;
  const clean = (cell: string | undefined) => (cell ?? '').replace(/\s*\n\s*/g, ' ');
  const lines = [headers, ...rows].map((row) => headers.map((_, i) => clean(row[i])));
  const widths = headers.map((_, i) => Math.max(...lines.map((line) => line[i]?.length ?? 0)));
  const separator = ' '.repeat(gap);
  return lines
    .map((cells) =>
      cells
        .map((cell, i) => {
          const width = widths[i] ?? 0;
          return align[i] === 'right' ? cell.padStart(width) : cell.padEnd(width);
        })
        .join(separator)
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join('');
}
