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

/**
 * Runs `body(baseUrl)` under the overall deadline and exits: 0 when it
 * resolves, 1 with a message when it throws or the deadline passes.
 * `cleanup` runs in both cases, bounded too.
 */
export async function runCheck(name, body, cleanup = async () => {}) {
  let code = 0;
  try {
    const base = baseUrlFromArgs();
    await within(`the whole ${name} check`, body(base), OVERALL_TIMEOUT_MS);
  } catch (e) {
    code = 1;
    const message = e instanceof CheckFailed ? e.message : e?.stack ?? String(e);
    console.error(`${name}: ${message}`);
  }
  try {
    await within(`${name}'s cleanup`, cleanup(), 5_000);
  } catch (e) {
    console.error(`${name}: cleanup: ${e?.message ?? e}`);
  }
  process.exit(code);
}
