// The web console in headless Chromium, driven by playwright-core:
// `node console.test.mjs BASE_URL TOKEN SHOTS_DIR` (run by `cargo xtask
// console`). BASE_URL is a strand-server on loopback with authentication
// on, TOKEN grants every right, SHOTS_DIR receives the screenshots. It
// enters the token, waits for the node's health and traffic, sees a
// stream created after the page loaded appear in the list, follows a
// JSON stream live (an append through the API shows up pretty-printed),
// appends from the box, pauses and resumes without losing or repeating a
// message, and shows a binary stream as hex. Exits 0, or 1 after printing
// what failed. Every wait is bounded; nothing leaves loopback.
import { chromium } from 'playwright-core';

const [base, token, shots] = process.argv.slice(2);
if (!base || !token || !shots) {
  console.error('usage: node console.test.mjs BASE_URL TOKEN SHOTS_DIR');
  process.exit(2);
}
if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(base)) {
  console.error(`console: ${base} is not a loopback URL`);
  process.exit(2);
}
const WAIT_MS = 15000;
const executablePath = process.env.STRAND_CHROMIUM || '/usr/bin/chromium';
const auth = { Authorization: `Bearer ${token}` };

async function api(method, path, body, contentType) {
  const headers = { ...auth };
  if (contentType) headers['Content-Type'] = contentType;
  const response = await fetch(base + path, { method, headers, body });
  if (!response.ok) {
    throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  }
  return response;
}

function step(message) {
  console.log(`console: ${message}`);
}

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const timer = setTimeout(() => {
  console.error('console: the check did not finish in 90 s');
  process.exit(1);
}, 90000);
let failed = false;
try {
  // Streams that exist before the page opens.
  await api('PUT', '/v1/stream/console/events', '[{"n":1,"kind":"first"}]', 'application/json');
  await api('PUT', '/v1/stream/console/log', 'hello from the log\n', 'text/plain');
  await api('PUT', '/v1/stream/console/blob', new Uint8Array([0xde, 0xad, 0xbe, 0xef, 0x00, 0x41]),
    'application/octet-stream');
  await api('PUT', '/v1/stream/console/docs/doc-1/.updates', 'update', 'text/plain');

  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => {
    console.error(`console: a script error on the page: ${e.message}`);
    failed = true;
  });
  await page.goto(`${base}/__strand/console`);

  // Without a token the listing is refused, and says so.
  await page.locator('#list-error').filter({ hasText: '401' }).waitFor({ timeout: WAIT_MS });
  step('without a token the page shows the 401');

  await page.fill('#token', token);
  await page.click('#token-form button[type=submit]');
  const stored = await page.evaluate(() => sessionStorage.getItem('strand.console.token'));
  if (stored !== token) throw new Error('the token is not in session storage');
  await page.locator('#node-status', { hasText: 'ok' }).waitFor({ timeout: WAIT_MS });
  await page.locator('#groups tbody tr').first().waitFor({ timeout: WAIT_MS });
  step(`health ok, ${await page.locator('#groups tbody tr').count()} groups shown`);

  await page.fill('#prefix', 'console/');
  await page.click('#list-form button[type=submit]');
  const row = (name) => page.locator('#stream-list tbody tr', {
    has: page.locator('button', { hasText: new RegExp(`^${name.replace(/[./]/g, '\\$&')}$`) }),
  });
  await row('console/events').waitFor({ timeout: WAIT_MS });
  await row('console/docs/doc-1/.updates').waitFor({ timeout: WAIT_MS });
  step('the listing shows the streams, hashed names by their names');

  // A stream created now appears by itself.
  await api('PUT', '/v1/stream/console/late', 'late', 'text/plain');
  await row('console/late').waitFor({ timeout: WAIT_MS });
  step('a stream created after the page loaded appeared in the list');

  // Follow the JSON stream: what is there, then an append through the API.
  await row('console/events').locator('button').click();
  const output = page.locator('#tail-output');
  await output.filter({ hasText: '"kind": "first"' }).waitFor({ timeout: WAIT_MS });
  await api('POST', '/v1/stream/console/events', '{"n":2,"kind":"live"}', 'application/json');
  await output.filter({ hasText: '"kind": "live"' }).waitFor({ timeout: WAIT_MS });
  step('the tail follows live, JSON pretty-printed');

  // Append from the box.
  await page.fill('#append-body', '{"n":3,"kind":"from the box"}');
  await page.click('#append-send');
  await page.locator('#append-result', { hasText: 'next offset' }).waitFor({ timeout: WAIT_MS });
  const tailAfterBox = (await page.locator('#append-result').textContent()).split(' ').pop();
  await output.filter({ hasText: '"kind": "from the box"' }).waitFor({ timeout: WAIT_MS });
  // The tail has read up to the box's append (its control event came).
  await page.locator('#tail-state', { hasText: tailAfterBox }).waitFor({ timeout: WAIT_MS });
  const stored3 = await (await api('GET', '/v1/stream/console/events?offset=-1')).json();
  if (!stored3.some((m) => m.kind === 'from the box')) {
    throw new Error(`the box's append is not in the stream: ${JSON.stringify(stored3)}`);
  }
  step('an append from the box reached the stream and the tail');

  await page.screenshot({ path: `${shots}/console.png`, fullPage: true });

  // Pause, append, follow again: the message shows once.
  await page.click('#tail-follow');
  await page.locator('#tail-state', { hasText: 'paused at' }).waitFor({ timeout: WAIT_MS });
  await api('POST', '/v1/stream/console/events', '{"n":4,"kind":"while paused"}', 'application/json');
  await page.click('#tail-follow');
  await output.filter({ hasText: '"kind": "while paused"' }).waitFor({ timeout: WAIT_MS });
  const text = await output.textContent();
  for (const kind of ['first', 'live', 'from the box', 'while paused']) {
    const count = text.split(`"kind": "${kind}"`).length - 1;
    if (count !== 1) throw new Error(`"${kind}" shows ${count} times:\n${text}`);
  }
  step('pause and follow resume where the tail stopped, nothing repeated');

  // Binary as hex.
  await row('console/blob').locator('button').click();
  await output.filter({ hasText: '00000000  de ad be ef 00 41' }).waitFor({ timeout: WAIT_MS });
  step('a binary stream shows as hex');

  // Traffic from the metrics (the token has the admin right).
  await page.waitForFunction(() => document.getElementById('rate-appends').textContent !== '-',
    null, { timeout: WAIT_MS });
  await page.locator('#metrics-error').waitFor({ state: 'hidden', timeout: WAIT_MS });
  step('the traffic charts read the metrics');

  // Traffic while a reader follows: the charts show both.
  await row('console/log').locator('button').click();
  await output.filter({ hasText: 'hello from the log' }).waitFor({ timeout: WAIT_MS });
  const started = Date.now();
  for (let i = 0; i < 40; i++) {
    await api('POST', '/v1/stream/console/log', `line ${i}\n`, 'text/plain');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await page.waitForFunction(() => Number(document.getElementById('rate-appends').textContent) > 0
    && document.getElementById('rate-readers').textContent === '1', null, { timeout: WAIT_MS });
  await output.filter({ hasText: 'line 39' }).waitFor({ timeout: WAIT_MS });
  step(`the charts show the appends and the live reader (${Date.now() - started} ms of traffic)`);
  await page.screenshot({ path: `${shots}/console-tail.png`, fullPage: true });

  const outside = requests.filter((u) => !u.startsWith(base + '/'));
  if (outside.length) throw new Error(`the page asked other origins: ${outside.join(', ')}`);
  step(`${requests.length} requests, all to the node`);
} catch (e) {
  console.error(`console: ${e.message}`);
  failed = true;
} finally {
  clearTimeout(timer);
  await browser.close();
}
process.exit(failed ? 1 : 0);
