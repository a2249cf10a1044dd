/**
 * The Prometheus text format as the services' `/metrics` serves it (OpenTelemetry's Prometheus
 * exporter): for every sample name, its family's type and the label names and values seen.
 */

/** What the scrapes showed of one sample name (`fleet_request_duration_bucket`, `up`, ...). */
export interface SampleInfo {
  /** `counter`, `gauge`, `histogram`, ... of its family (`untyped` without a TYPE line). */
  type: string;
  /** Label names, each with the values seen. */
  labels: Map<string, Set<string>>;
  /** The services whose `/metrics` had it. */
  services: Set<string>;
}

/** Sample name → what the scrapes showed. */
export type MetricIndex = Map<string, SampleInfo>;

const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];

function familyType(types: Map<string, string>, sample: string): string {
  const exact = types.get(sample);
  if (exact) return exact;
  for (const suffix of HISTOGRAM_SUFFIXES) {
    if (!sample.endsWith(suffix)) continue;
    const type = types.get(sample.slice(0, -suffix.length));
    if (type === 'histogram' || type === 'summary') return type;
  }
  return 'untyped';
}

/** Add one service's `/metrics` text to `index` (created when absent). */
export function indexExposition(
  text: string,
  service: string,
  index: MetricIndex = new Map(),
): MetricIndex {
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type?.[1] && type[2]) types.set(type[1], type[2]);
  }
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s/.exec(line);
    if (!sample?.[1]) throw new Error(`not a sample line: ${line.slice(0, 120)}`);
    const name = sample[1];
    let info = index.get(name);
    if (!info) {
      info = { type: familyType(types, name), labels: new Map(), services: new Set() };
      index.set(name, info);
    }
    info.services.add(service);
    for (const pair of (sample[3] ?? '').matchAll(
      /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g,
    )) {
      const [, label = '', value = ''] = pair;
      let values = info.labels.get(label);
      if (!values) {
        values = new Set();
        info.labels.set(label, values);
      }
      values.add(value.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c)));
    }
  }
  return index;
}
