// Shared by the checks of `cargo xtask apps`: the command line, one overall
// deadline, and waiting on events instead of sleeping.
//
// Each check is `node CHECK.mjs BASE_URL` and exits 0 when it passes, or 1
// after printing `NAME: what went wrong` on stderr.

/** The overall bound of one check, in milliseconds. */
export const OVERALL_TIMEOUT_MS = 30_000;

/** A failed expectation, reported by `runCheck` without a stack trace. */
export class CheckFailed extends Error {}

/** Throws `CheckFailed` with `message` unless `condition`. */
export function expect(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

/** Throws unless `got` and `want` are equal as JSON. */
export function expectEqual(what, got, want) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  expect(g === w, `${what}: got ${g}, expected ${w}`);
}

/**
 * `http://HOST:PORT` from the command line, without a trailing slash; the
 * host must be a loopback address: nothing here talks to any other.
 */
export function baseUrlFromArgs() {
  const arg = process.argv[2];
  if (!arg) throw new CheckFailed("usage: node CHECK.mjs BASE_URL");
  const url = new URL(arg);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const loopback = /^127(\.\d{1,3}){3}$/.test(host) || host === "::1" || host === "localhost";
  expect(url.protocol === "http:" && loopback, `${arg} is not an http:// URL on loopback`);
  return arg.replace(/\/+$/, "");
}

/** A short unique name for streams and documents of this run. */
export function uniqueName(prefix) {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * A promise with its resolve and reject exposed, for events that arrive
 * through callbacks.
 */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Resolves once `predicate()` holds, re-checked whenever `subscribe`'s
 * listener is called (subscribe(listener) returns an unsubscribe function).
 * Rejects after `ms` with `what` in the message.
 */
export function until(what, predicate, subscribe, ms = OVERALL_TIMEOUT_MS) {
  return new Promise((resolve, reject) => {
    let unsubscribe = () => {};
    let done = false;
    const finish = (error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(
      () => finish(new CheckFailed(`timed out after ${ms} ms waiting for ${what}`)),
      ms,
    );
    const check = () => {
      try {
        if (predicate()) finish();
      } catch (e) {
        finish(e);
      }
    };
    unsubscribe = subscribe(check) ?? (() => {});
    check();
  });
}

/** `promise`, or a rejection naming `what` if it takes longer than `ms`. */
export function within(what, promise, ms = OVERALL_TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new CheckFailed(`timed out after ${ms} ms waiting for ${what}`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The first answers >= 400 of the server under test, in order. */
const serverErrors = [];

/**
 * Wraps the global `fetch` so that answers >= 400 from `base` (the server
 * under test, also when a library's own server proxies to it) are kept for
 * the failure message: `METHOD PATH -> STATUS body` (the first 50).
 */
function recordServerErrors(base) {
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const response = await original(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (response.status >= 400 && url.startsWith(`${base}/`)) {
      const method = init?.method ?? (input instanceof Request ? input.method : "GET");
      const body = (await response.clone().text().catch(() => "")).replace(/\s+/g, " ").slice(0, 160);
      serverErrors.push(`${method} ${url.slice(base.length)} -> ${response.status} ${body}`.trim());
      if (serverErrors.length > 50) serverErrors.pop();
    }
    return response;
  };
}

/**
 * Runs `body(baseUrl)` under the overall deadline and exits: 0 when it
 * resolves, 1 with a message when it throws or the deadline passes (with
 * the server's last error answer, if any). `cleanup` runs in both cases,
 * bounded too.
 */
export async function runCheck(name, body, cleanup = async () => {}) {
  let code = 0;
  try {
    const base = baseUrlFromArgs();
    recordServerErrors(base);
    await within(`the whole ${name} check`, body(base), OVERALL_TIMEOUT_MS);
  } catch (e) {
    code = 1;
    const message = e instanceof Error ? e.message : String(e);
    // A lookup that misses (404 to GET or HEAD) is often expected; the first
    // other error answer is the likely cause.
    const lookupMiss = /^(GET|HEAD) \S+ -> 404/;
    const cause = serverErrors.find((a) => !lookupMiss.test(a)) ?? serverErrors.at(-1);
    console.error(`${name}: ${message}${cause ? ` [server answered: ${cause}]` : ""}`);
    if (!(e instanceof CheckFailed) && e?.stack) console.error(e.stack);
    for (const answer of serverErrors) console.error(`  server answered: ${answer}`);
  }
  try {
    await within(`${name}'s cleanup`, cleanup(), 5_000);
  } catch (e) {
    console.error(`${name}: cleanup: ${e?.message ?? e}`);
  }
  process.exit(code);
}
