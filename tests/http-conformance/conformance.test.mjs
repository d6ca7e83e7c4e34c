// The official Durable Streams HTTP conformance suite, run against the server
// at CONFORMANCE_TEST_URL (e.g. http://127.0.0.1:4437). The suite's own CLI
// does not work from an npm install with vitest 4 (spec 08 §0), so this file
// calls its entry point; `cargo xtask http-conformance` starts a server and
// runs `vitest run conformance.test.mjs` here.
//
// CONFORMANCE_LONG_POLL_TIMEOUT_MS is the server's idle long-poll timeout; the
// suite sizes its long-poll test timeouts from it.
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

const baseUrl = process.env.CONFORMANCE_TEST_URL;
if (!baseUrl) {
  throw new Error("set CONFORMANCE_TEST_URL to the server's base URL (http://127.0.0.1:PORT)");
}
const longPollTimeoutMs = Number(process.env.CONFORMANCE_LONG_POLL_TIMEOUT_MS ?? "500");
if (!Number.isFinite(longPollTimeoutMs) || longPollTimeoutMs <= 0) {
  throw new Error("CONFORMANCE_LONG_POLL_TIMEOUT_MS must be a positive number of milliseconds");
}

// CONFORMANCE_AUTHORIZATION (test only): an Authorization header value added
// to every request the suite and its client make, so the suite runs against
// a server with authentication on (`cargo xtask http-conformance --auth`).
const authorization = process.env.CONFORMANCE_AUTHORIZATION;
if (authorization) {
  const plainFetch = globalThis.fetch;
  globalThis.fetch = (input, init = {}) => {
    const base = init.headers ?? (input instanceof Request ? input.headers : undefined);
    const headers = new Headers(base);
    if (!headers.has("authorization")) headers.set("authorization", authorization);
    return plainFetch(input, { ...init, headers });
  };
}

// CONFORMANCE_SUBSCRIPTIONS=1 also runs the suite's opt-in tests of the
// reserved subscription API. One registers a webhook at 10.0.0.1, so they
// run only inside a loopback-only network namespace: `cargo xtask
// http-conformance --subscriptions` sets this there, and nowhere else.
const subscriptions = process.env.CONFORMANCE_SUBSCRIPTIONS === "1";

// Called at the top level: each top-level describe block is one area.
runConformanceTests({ baseUrl, longPollTimeoutMs, subscriptions });
