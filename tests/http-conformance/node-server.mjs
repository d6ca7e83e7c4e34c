// Starts the node reference server of the Durable Streams protocol
// (@durable-streams/server, in memory) on a loopback port, to check the
// conformance runner itself: `cargo xtask http-conformance --server node`.
//
// Prints exactly one line on stdout when ready, in strand-server's format:
//   node reference server listening on http://127.0.0.1:PORT
// Options (environment): LONG_POLL_TIMEOUT_MS (default 500), PORT (default
// 0, any free port), WEBHOOKS=1 to accept webhook subscriptions (the
// server's `webhooks` option; it then delivers to http://127.0.0.x and
// localhost, and to public https hosts). Stops on SIGTERM, SIGINT, or when
// stdin closes.
import { DurableStreamTestServer } from "@durable-streams/server";

const longPollTimeout = Number(process.env.LONG_POLL_TIMEOUT_MS ?? "500");
const port = Number(process.env.PORT ?? "0");

const webhooks = process.env.WEBHOOKS === "1";

const server = new DurableStreamTestServer({ host: "127.0.0.1", port, longPollTimeout, webhooks });
const url = await server.start();
console.log(`node reference server listening on ${url}`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await server.stop();
  } finally {
    process.exit(0);
  }
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
// The runner holds our stdin open; when it goes away, so do we.
process.stdin.on("end", stop);
process.stdin.on("error", stop);
process.stdin.resume();
