// The strand console: a node's health and groups, traffic charts from
// its Prometheus metrics, a bucket's streams by prefix, a live tail of one
// stream over SSE and an append box. Plain JavaScript, no dependencies:
// everything it loads comes from the server that serves it.
'use strict';

const TOKEN_KEY = 'strand.console.token';
const HEALTH_EVERY_MS = 2000;
const METRICS_EVERY_MS = 2000;
const LIST_EVERY_MS = 2000;
const CHART_POINTS = 60;
const TAIL_MAX_CHARS = 200000;
const TAIL_RETRY_MS = 1000;

const $ = (id) => document.getElementById(id);

// ---- requests -----------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

function withToken(headers) {
  const out = { ...(headers || {}) };
  const t = token();
  if (t) out.Authorization = 'Bearer ' + t;
  return out;
}

function api(path, options) {
  const o = options || {};
  return fetch(path, { ...o, cache: 'no-store', headers: withToken(o.headers) });
}

async function errorText(response) {
  const text = (await response.text().catch(() => '')).trim();
  return `${response.status} ${response.statusText}${text ? ': ' + text.slice(0, 500) : ''}`;
}

function showError(id, message) {
  const el = $(id);
  el.textContent = message || '';
  el.hidden = !message;
}

function cell(row, text, className) {
  const td = document.createElement('td');
  td.textContent = text === undefined || text === null ? '-' : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

// ---- node health ---------------------------------------------------------

async function refreshHealth() {
  const badge = $('node-status');
  try {
    const response = await api('/__strand/health');
    const health = await response.json();
    badge.textContent = health.status;
    badge.className = 'badge ' + (health.status === 'ok' ? 'ok' : 'bad');
    $('node-mode').textContent = health.mode || '';
    const head = $('groups').tHead;
    const body = $('groups').tBodies[0];
    const columns = ['group', 'leader', 'applied_index', 'last_log_index'];
    head.replaceChildren();
    const hr = head.insertRow();
    for (const c of columns) {
      const th = document.createElement('th');
      th.textContent = c.replace(/_/g, ' ');
      hr.appendChild(th);
    }
    body.replaceChildren();
    if (!(health.groups || []).length) {
      const row = body.insertRow();
      cell(row, 'a node in memory: no replication log, every group is led here').colSpan = columns.length;
    }
    for (const g of health.groups || []) {
      const status = g.replication || g;
      const row = body.insertRow();
      for (const c of columns) cell(row, status[c]);
    }
    showError('health-error', '');
  } catch (e) {
    badge.textContent = 'unreachable';
    badge.className = 'badge bad';
    showError('health-error', 'health: ' + e.message);
  }
}

// ---- traffic charts ------------------------------------------------------

const series = { appends: [], bytes: [], readers: [] };
let lastCounters = null;

/// The sum of a metric's samples in Prometheus text, or null when absent.
function metricSum(text, name) {
  let sum = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const value = Number(line.trim().split(/\s+/).pop());
    if (Number.isFinite(value)) sum = (sum || 0) + value;
  }
  return sum;
}

function push(points, value) {
  points.push(value);
  while (points.length > CHART_POINTS) points.shift();
}

function draw(canvasId, points) {
  const canvas = $(canvasId);
  const ctx = canvas.getContext('2d');
  const w = canvas.width;
  const h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  if (points.length < 2) return;
  const max = Math.max(1, ...points);
  ctx.strokeStyle = '#0b57d0';
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  points.forEach((v, i) => {
    const x = (i / (CHART_POINTS - 1)) * (w - 2) + 1;
    const y = h - 2 - (v / max) * (h - 6);
    if (i === 0) ctx.moveTo(x, y);
    else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = '#6b7480';
  ctx.font = '10px sans-serif';
  ctx.fillText(formatNumber(max), 3, 10);
}

function formatNumber(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
  return String(Math.round(n * 10) / 10);
}

async function refreshMetrics() {
  let response;
  try {
    response = await api('/metrics');
  } catch (e) {
    showError('metrics-error', 'metrics: ' + e.message);
    return;
  }
  if (!response.ok) {
    const why = response.status === 401 || response.status === 403
      ? ' (the metrics need a token with the admin right on *, or the admin listener)'
      : '';
    showError('metrics-error', 'metrics: ' + (await errorText(response)) + why);
    lastCounters = null;
    return;
  }
  const text = await response.text();
  const now = performance.now();
  const counters = {
    at: now,
    appends: metricSum(text, 'strand_appends_total') || 0,
    bytes: metricSum(text, 'strand_appended_bytes_total') || 0,
  };
  const readers = metricSum(text, 'strand_live_readers') || 0;
  if (lastCounters) {
    const seconds = Math.max(0.001, (now - lastCounters.at) / 1000);
    const appends = Math.max(0, counters.appends - lastCounters.appends) / seconds;
    const bytes = Math.max(0, counters.bytes - lastCounters.bytes) / seconds;
    push(series.appends, appends);
    push(series.bytes, bytes);
    $('rate-appends').textContent = formatNumber(appends);
    $('rate-bytes').textContent = formatNumber(bytes);
  }
  push(series.readers, readers);
  $('rate-readers').textContent = String(readers);
  lastCounters = counters;
  draw('chart-appends', series.appends);
  draw('chart-bytes', series.bytes);
  draw('chart-readers', series.readers);
  showError('metrics-error', '');
}

// ---- streams -------------------------------------------------------------

const listing = { bucket: 'default', prefix: '', cursors: [null], page: 0, rows: [] };

async function refreshList() {
  const cursor = listing.cursors[listing.page];
  const params = new URLSearchParams({ prefix: listing.prefix, limit: '50' });
  if (cursor) params.set('after', cursor);
  let response;
  try {
    response = await api(`/__strand/streams/${encodeURIComponent(listing.bucket)}?${params}`);
  } catch (e) {
    showError('list-error', 'streams: ' + e.message);
    return;
  }
  if (!response.ok) {
    showError('list-error', 'streams: ' + (await errorText(response)));
    return;
  }
  const page = await response.json();
  showError('list-error', '');
  listing.rows = page.streams;
  listing.cursors.length = listing.page + 1;
  if (page.next) listing.cursors.push(page.next);
  const body = $('stream-list').tBodies[0];
  body.replaceChildren();
  for (const s of page.streams) {
    const row = body.insertRow();
    row.dataset.url = s.url;
    if (tail.stream && tail.stream.url === s.url) row.className = 'selected';
    const name = cell(row, '', 'name');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link';
    button.textContent = s.name;
    button.title = 'follow ' + s.name;
    button.addEventListener('click', () => select(s));
    name.appendChild(button);
    cell(row, s.bytes);
    cell(row, s.next_offset, 'offset');
    cell(row, s.content_type, 'type');
    cell(row, s.closed ? 'yes' : 'no');
  }
  $('page-next').disabled = !page.next;
  $('page-first').disabled = listing.page === 0;
  $('page-info').textContent = `page ${listing.page + 1}, ${page.streams.length} streams`;
}

// ---- tail ----------------------------------------------------------------

const tail = {
  stream: null,
  offset: '-1',
  cursor: null,
  following: false,
  abort: null,
  rendering: 'text',
  hexOffset: 0,
  generation: 0,
};

function select(stream) {
  stopFollowing();
  tail.stream = stream;
  tail.offset = '-1';
  tail.cursor = null;
  tail.hexOffset = 0;
  $('tail-output').textContent = '';
  $('tail-name').textContent = '— ' + stream.name;
  for (const row of $('stream-list').tBodies[0].rows) {
    row.className = row.dataset.url === stream.url ? 'selected' : '';
  }
  for (const id of ['tail-follow', 'tail-clear', 'append-body', 'append-send']) $(id).disabled = false;
  $('append-result').textContent = '';
  startFollowing();
}

function stopFollowing() {
  tail.following = false;
  tail.generation += 1;
  if (tail.abort) tail.abort.abort();
  tail.abort = null;
  $('tail-follow').textContent = 'Follow';
  $('tail-state').textContent = tail.stream ? 'paused at ' + tail.offset : '';
}

function startFollowing() {
  if (!tail.stream) return;
  tail.following = true;
  $('tail-follow').textContent = 'Pause';
  follow(tail.generation);
}

function write(text) {
  const out = $('tail-output');
  let all = out.textContent + text;
  if (all.length > TAIL_MAX_CHARS) all = all.slice(all.length - TAIL_MAX_CHARS);
  out.textContent = all;
  out.scrollTop = out.scrollHeight;
}

function hexLines(bytes) {
  let text = '';
  for (let i = 0; i < bytes.length; i += 16) {
    const chunk = bytes.slice(i, i + 16);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    text += (tail.hexOffset + i).toString(16).padStart(8, '0') + '  ' + hex.padEnd(47) + '  ' + ascii + '\n';
  }
  tail.hexOffset += bytes.length;
  return text;
}

function render(data) {
  if (tail.rendering === 'hex') {
    const binary = atob(data.replace(/\s/g, ''));
    return hexLines(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  }
  if (tail.rendering === 'json') {
    try {
      const value = JSON.parse(data);
      const messages = Array.isArray(value) ? value : [value];
      return messages.map((m) => JSON.stringify(m, null, 2) + '\n').join('');
    } catch {
      return data + '\n';
    }
  }
  return data.endsWith('\n') ? data : data + '\n';
}

/// One SSE event (its `event:` kind and joined `data:` lines).
function onEvent(kind, data) {
  if (kind === 'data') {
    write(render(data));
  } else if (kind === 'control') {
    const control = JSON.parse(data);
    if (control.streamNextOffset) tail.offset = control.streamNextOffset;
    if (control.streamCursor) tail.cursor = control.streamCursor;
    $('tail-state').textContent = (control.upToDate ? 'up to date at ' : 'at ') + tail.offset;
    if (control.streamClosed) {
      tail.closed = true;
    }
  }
}

/// Follows the stream over SSE from `tail.offset`, reconnecting when the
/// server ends a response, until paused or another stream is chosen.
async function follow(generation) {
  while (tail.following && generation === tail.generation) {
    const controller = new AbortController();
    tail.abort = controller;
    tail.closed = false;
    const params = new URLSearchParams({ offset: tail.offset, live: 'sse' });
    if (tail.cursor) params.set('cursor', tail.cursor);
    try {
      const response = await api(`${tail.stream.url}?${params}`, {
        signal: controller.signal,
        headers: { Accept: 'text/event-stream' },
      });
      if (!response.ok) {
        showError('tail-error', 'tail: ' + (await errorText(response)));
        stopFollowing();
        return;
      }
      showError('tail-error', '');
      const encoding = (response.headers.get('stream-sse-data-encoding') || '').toLowerCase();
      const type = (tail.stream.content_type || '').toLowerCase();
      tail.rendering = encoding === 'base64' ? 'hex' : type.startsWith('application/json') ? 'json' : 'text';
      await readEvents(response.body, generation);
    } catch (e) {
      if (generation !== tail.generation) return;
      showError('tail-error', 'tail: ' + e.message + ' (retrying)');
      await new Promise((resolve) => setTimeout(resolve, TAIL_RETRY_MS));
    }
    if (tail.closed) {
      $('tail-state').textContent = 'closed at ' + tail.offset;
      tail.following = false;
      $('tail-follow').textContent = 'Follow';
      return;
    }
    if (tail.following && generation === tail.generation) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function readEvents(body, generation) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let kind = 'message';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done || generation !== tail.generation) return;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline);
      const skip = buffer.startsWith('\r\n', newline) ? 2 : 1;
      buffer = buffer.slice(newline + skip);
      if (line === '') {
        if (data.length) onEvent(kind, data.join('\n'));
        kind = 'message';
        data = [];
      } else if (line.startsWith('event:')) {
        kind = line.slice(6).trim();
      } else if (line.startsWith('data:')) {
        let d = line.slice(5);
        if (d.startsWith(' ')) d = d.slice(1);
        data.push(d);
      }
    }
  }
}

// ---- append --------------------------------------------------------------

async function append(event) {
  event.preventDefault();
  if (!tail.stream) return;
  const body = $('append-body').value;
  const result = $('append-result');
  result.textContent = 'appending…';
  try {
    const response = await api(tail.stream.url, {
      method: 'POST',
      headers: { 'Content-Type': tail.stream.content_type },
      body,
    });
    if (!response.ok) {
      result.textContent = 'failed: ' + (await errorText(response));
      return;
    }
    result.textContent = 'appended; next offset ' + (response.headers.get('stream-next-offset') || '?');
    $('append-body').value = '';
  } catch (e) {
    result.textContent = 'failed: ' + e.message;
  }
}

// ---- wiring --------------------------------------------------------------

function every(ms, f) {
  f();
  setInterval(f, ms);
}

document.addEventListener('DOMContentLoaded', () => {
  $('token').value = token();
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
    lastCounters = null;
    refreshHealth();
    refreshMetrics();
    refreshList();
  });
  $('token-clear').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $('token').value = '';
  });
  $('list-form').addEventListener('submit', (e) => {
    e.preventDefault();
    listing.bucket = $('bucket').value.trim() || 'default';
    listing.prefix = $('prefix').value;
    listing.cursors = [null];
    listing.page = 0;
    refreshList();
  });
  $('page-next').addEventListener('click', () => {
    if (listing.cursors.length > listing.page + 1) {
      listing.page += 1;
      refreshList();
    }
  });
  $('page-first').addEventListener('click', () => {
    listing.page = 0;
    refreshList();
  });
  $('tail-follow').addEventListener('click', () => {
    if (tail.following) stopFollowing();
    else startFollowing();
  });
  $('tail-clear').addEventListener('click', () => {
    $('tail-output').textContent = '';
  });
  $('append-form').addEventListener('submit', append);
  every(HEALTH_EVERY_MS, refreshHealth);
  every(METRICS_EVERY_MS, refreshMetrics);
  every(LIST_EVERY_MS, refreshList);
});
