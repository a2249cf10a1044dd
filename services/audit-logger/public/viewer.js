// The audit trail viewer: search records through the audit API and draw one trace's
// interceptor chain as a waterfall. Plain DOM, no framework, no build step. Every value from
// the API is inserted as text (never as HTML).

const TOKEN_KEY = 'fleet-audit-read-token';
const PAGE_SIZE = 50;
const FILTERS = ['traceId', 'tool', 'principal', 'decision', 'kind', 'since', 'until'];

const $ = (id) => document.getElementById(id);
const state = {
  config: { traceUrlTemplate: null, authRequired: false },
  cursor: null,
  params: null,
};

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** Create an element with attributes and children (strings become text nodes). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'style') Object.assign(node.style, value);
    else if (key.startsWith('data-')) node.setAttribute(key, String(value));
    else if (key === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Number.POSITIVE_INFINITY)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setStatus(message, isError = false) {
  const status = $('status');
  status.textContent = message;
  status.classList.toggle('error', isError);
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

function showTokenForm(show) {
  $('token-form').hidden = !show;
}

async function api(path) {
  const headers = { accept: 'application/json' };
  if (token()) headers.authorization = `Bearer ${token()}`;
  const response = await fetch(path, { headers });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    showTokenForm(true);
    throw new ApiError('This audit trail needs a read token: enter it above.', 401);
  }
  if (!response.ok) {
    const issues = body?.error?.issues;
    const message = Array.isArray(issues)
      ? issues.map((issue) => `${issue.parameter}: ${issue.message}`).join('; ')
      : (body?.error?.message ?? `HTTP ${response.status}`);
    throw new ApiError(message, response.status);
  }
  return body;
}

function formatTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().replace('T', ' ').replace('Z', '');
}

function formatMs(ms) {
  if (typeof ms !== 'number') return '';
  if (ms === 0) return '0 ms';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(0)} ms`;
  return `${ms.toFixed(ms < 1 ? 2 : 1)} ms`;
}

function principalText(principal) {
  if (!principal) return '';
  return principal.id ? `${principal.type}:${principal.id}` : principal.type;
}

function outcomeClass(outcome) {
  const known = [
    'allowed',
    'unchanged',
    'modified',
    'warned',
    'denied',
    'failed',
    'timeout',
    'error',
  ];
  return `outcome-${known.includes(outcome) ? outcome : 'other'}`;
}

// ---------------------------------------------------------------------------------------------
// Records table

function formParams() {
  const form = new FormData($('search'));
  const params = new URLSearchParams();
  for (const name of FILTERS) {
    const value = String(form.get(name) ?? '').trim();
    if (value) params.set(name, value);
  }
  return params;
}

function recordRow(record) {
  const traceCell = record.traceId
    ? el(
        'button',
        {
          type: 'button',
          class: 'trace-button',
          title: record.traceId,
          onclick: () => {
            $('traceId').value = record.traceId;
            void search();
          },
        },
        `${record.traceId.slice(0, 12)}…`,
      )
    : '';
  const names = (record.interceptors ?? []).map((i) => i.name).join(', ');
  return el(
    'tr',
    { 'data-id': record.id },
    el('td', { class: 'mono' }, formatTime(record.timestamp)),
    el('td', {}, record.kind),
    el('td', {}, `${record.event} `, el('small', {}, record.phase)),
    el('td', {}, record.target ?? ''),
    el('td', {}, principalText(record.principal)),
    el('td', {}, el('span', { class: `pill decision-${record.decision}` }, record.decision)),
    el('td', {}, record.status),
    el('td', { class: 'num' }, formatMs(record.durationMs)),
    el('td', { title: names }, names.length > 48 ? `${names.slice(0, 47)}…` : names),
    el('td', {}, traceCell),
  );
}

async function loadRecords(params, append) {
  const query = new URLSearchParams(params);
  query.set('limit', String(PAGE_SIZE));
  if (append && state.cursor) query.set('cursor', state.cursor);
  const page = await api(`api/audit/records?${query}`);
  const body = $('records-body');
  if (!append) body.replaceChildren();
  for (const record of page.records) body.append(recordRow(record));
  if (!append && page.records.length === 0)
    body.append(el('tr', {}, el('td', { colspan: 10, class: 'empty' }, 'No records match.')));
  state.cursor = page.nextCursor ?? null;
  $('more').hidden = !state.cursor;
  return page.records.length;
}

// ---------------------------------------------------------------------------------------------
// Trace waterfall

/**
 * Where each interceptor of a chain record ran. Records know each invocation's duration and
 * the chain's total; positions follow the chain's order: request = validators in parallel,
 * then mutators in sequence; response = mutators in sequence, then validators. Audit-mode
 * invocations run off the critical path, from the start.
 */
function layoutChain(record) {
  const end = Date.parse(record.timestamp);
  const start = end - (record.durationMs ?? 0);
  const interceptors = record.interceptors ?? [];
  const active = interceptors.filter((i) => i.mode !== 'audit');
  const audit = interceptors.filter((i) => i.mode === 'audit');
  const validators = active.filter((i) => i.type === 'validation');
  const mutators = active.filter((i) => i.type === 'mutation');
  const rows = [];
  const parallel = (list, at) => {
    let longest = 0;
    for (const i of list) {
      rows.push({ interceptor: i, start: at, end: at + i.durationMs });
      longest = Math.max(longest, i.durationMs);
    }
    return at + longest;
  };
  const sequence = (list, at) => {
    let t = at;
    for (const i of list) {
      rows.push({ interceptor: i, start: t, end: t + i.durationMs });
      t += i.durationMs;
    }
    return t;
  };
  if (record.phase === 'response') parallel(validators, sequence(mutators, start));
  else sequence(mutators, parallel(validators, start));
  parallel(audit, start);
  return { start, end, rows };
}

function traceLink(traceId) {
  const template = state.config.traceUrlTemplate;
  if (!template) return null;
  return template.split('{traceId}').join(encodeURIComponent(traceId));
}

function renderWaterfall(records) {
  const container = $('waterfall');
  container.replaceChildren();
  if (records.length === 0) {
    container.append(el('p', { class: 'empty' }, 'No records for this trace.'));
    return;
  }
  const groups = records.map((record) =>
    record.kind === 'chain'
      ? { record, ...layoutChain(record) }
      : {
          record,
          start: Date.parse(record.timestamp),
          end: Date.parse(record.timestamp),
          rows: [],
        },
  );
  let t0 = Math.min(...groups.map((g) => g.start));
  let t1 = Math.max(...groups.map((g) => Math.max(g.end, ...g.rows.map((r) => r.end))));
  if (!(t1 > t0)) {
    t0 -= 0.5;
    t1 += 0.5;
  }
  const span = t1 - t0;
  const pct = (t) => `${(((t - t0) / span) * 100).toFixed(3)}%`;
  const width = (a, b) => `${Math.max(((b - a) / span) * 100, 0.4).toFixed(3)}%`;

  const ticks = el('div', { class: 'wf-ticks' });
  for (const fraction of [0, 0.25, 0.5, 0.75, 1])
    ticks.append(
      el(
        'span',
        { class: 'wf-tick', style: { left: `${fraction * 100}%` } },
        formatMs(span * fraction),
      ),
    );
  container.append(
    el(
      'div',
      { class: 'wf-axis' },
      el('span', {}, 'interceptor'),
      ticks,
      el('span', {}, 'outcome'),
    ),
  );

  for (const group of groups) {
    const { record } = group;
    const head = `${record.event} ${record.phase}`;
    const marker =
      record.kind === 'chain'
        ? el('div', {
            class: `wf-bar ${record.decision === 'allowed' ? 'outcome-allowed' : record.decision === 'denied' ? 'outcome-denied' : 'outcome-failed'}`,
            style: { left: pct(group.start), width: width(group.start, group.end) },
          })
        : el('div', {
            class: 'wf-marker outcome-allowed mode-audit',
            style: { left: pct(group.start) },
          });
    container.append(
      el(
        'div',
        { class: 'wf-group', 'data-record': record.id, 'data-kind': record.kind },
        el(
          'div',
          { class: 'wf-label' },
          el('span', {}, head),
          record.target ? el('small', {}, record.target) : null,
          el('span', { class: `pill decision-${record.decision}` }, record.decision),
          record.kind === 'invocation' ? el('small', {}, 'seen by audit-logger') : null,
        ),
        el('div', { class: 'wf-track' }, marker),
        el(
          'div',
          { class: 'wf-info' },
          `${record.status} · ${formatMs(record.durationMs)} · ${formatTime(record.timestamp)}`,
        ),
      ),
    );
    const reasons = record.abortReasons ?? [];
    for (const row of group.rows) {
      const i = row.interceptor;
      const blocking = reasons.filter((reason) => reason.interceptor === i.name);
      const messages = (i.messages ?? []).map((m) => m.message).join('; ');
      container.append(
        el(
          'div',
          {
            class: 'wf-row',

            'data-interceptor': i.name,
            'data-outcome': i.outcome,
            'data-mode': i.mode,
          },
          el(
            'div',
            { class: 'wf-label', title: `${i.name} (${i.type}, ${i.mode})` },
            i.name,
            ' ',
            el('small', {}, `${i.type}${i.mode === 'audit' ? ' · audit' : ''}`),
          ),
          el(
            'div',
            { class: 'wf-track' },
            el('div', {
              class: `wf-bar ${outcomeClass(i.outcome)}${i.mode === 'audit' ? ' mode-audit' : ''}`,
              style: { left: pct(row.start), width: width(row.start, row.end) },
              title: `${i.name}: ${i.outcome}, ${formatMs(i.durationMs)}`,
            }),
          ),
          el(
            'div',
            { class: 'wf-info', title: messages || undefined },
            `${i.outcome} · ${formatMs(i.durationMs)}`,
            ...blocking.map((reason) => [
              ' ',
              el('span', { class: 'abort-reason' }, `blocked: ${reason.reason}`),
            ]),
          ),
        ),
      );
    }
    if (reasons.length > 0)
      container.append(
        el(
          'div',
          { class: 'wf-reasons', 'data-record': record.id },
          el('strong', {}, 'Aborted: '),
          reasons.map((reason, index) => [
            index > 0 ? '; ' : '',
            el(
              'span',
              { class: 'abort-reason' },
              `${reason.interceptor} (${reason.type}, ${reason.phase}): ${reason.reason}`,
            ),
          ]),
        ),
      );
  }
}

async function showTrace(traceId) {
  const trace = await api(`api/audit/traces/${encodeURIComponent(traceId)}`);
  $('trace').hidden = false;
  $('trace-id').textContent = trace.traceId;
  const link = traceLink(trace.traceId);
  const anchor = $('trace-link');
  anchor.hidden = !link;
  if (link) anchor.href = link;
  const records = trace.records;
  const denied = records.filter((r) => r.decision === 'denied').length;
  const errors = records.filter((r) => r.decision === 'error').length;
  $('trace-summary').textContent =
    records.length === 0
      ? 'No audit records carry this trace id (yet).'
      : `${records.length} record${records.length === 1 ? '' : 's'} from ${formatTime(records[0].timestamp)}` +
        ` · ${denied} denied · ${errors} error${errors === 1 ? '' : 's'}` +
        // The API holds back the rest of a very large trace (MAX_TRACE_CHARS).
        (trace.truncated ? ' · the first ones only: the trace has more than one answer holds' : '');
  renderWaterfall(records);
}

// ---------------------------------------------------------------------------------------------
// Search and wiring

async function search() {
  const params = formParams();
  state.params = params;
  const url = new URL(window.location.href);
  url.search = params.toString();
  window.history.replaceState(null, '', url);
  setStatus('Searching…');
  try {
    const traceId = params.get('traceId');
    if (traceId) await showTrace(traceId);
    else $('trace').hidden = true;
    const count = await loadRecords(params, false);
    setStatus(`${count}${state.cursor ? '+' : ''} record${count === 1 ? '' : 's'}`);
  } catch (error) {
    setStatus(error instanceof ApiError ? error.message : `Request failed: ${error}`, true);
  }
}

async function start() {
  try {
    const response = await fetch('api/audit/config', { headers: { accept: 'application/json' } });
    if (response.ok) state.config = await response.json();
  } catch {
    // The API answers below with a clearer error.
  }
  showTokenForm(state.config.authRequired);
  $('token').value = token();

  const initial = new URLSearchParams(window.location.search);
  for (const name of FILTERS) {
    const value = initial.get(name);
    if (value) $(name).value = value;
  }
  $('search').addEventListener('submit', (event) => {
    event.preventDefault();
    void search();
  });
  $('search').addEventListener('reset', () => {
    setTimeout(() => void search(), 0);
  });
  $('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
    void search();
  });
  $('more').addEventListener('click', async () => {
    try {
      await loadRecords(state.params ?? formParams(), true);
    } catch (error) {
      setStatus(error instanceof ApiError ? error.message : String(error), true);
    }
  });
  if (state.config.authRequired && !token()) {
    setStatus('This audit trail needs a read token: enter it above.');
    return;
  }
  await search();
}

void start();
