// @durable-streams/y-durable-streams with yjs: the package's Yjs server runs
// in this process on loopback in front of the Durable Streams server under
// test, and its client provider edits documents through it.
//
// Checks: two editing clients converge on the same text; awareness from one
// reaches the other; a client that disconnects and reconnects catches up on
// the edits it missed; a late client joining after the edits sees them all.
// Then the compaction path, on a second Yjs server with a 1,500-byte
// snapshot threshold: one update larger than that triggers a snapshot
// (observed through the document's `?offset=snapshot` redirect); (a) a late
// joiner when nothing came after the snapshot, and (b) another after more
// updates, must both converge (each loads the snapshot, then reads the
// updates stream from the snapshot's offset + 1).
//
// Usage: node yjs.mjs BASE_URL
import { YjsProvider } from "@durable-streams/y-durable-streams";
import { YjsServer } from "@durable-streams/y-durable-streams/server";
import { Awareness } from "y-protocols/awareness";
import * as Y from "yjs";

import { CheckFailed, expect, expectEqual, runCheck, uniqueName, until, within } from "./common.mjs";

const SNAPSHOT_THRESHOLD_BYTES = 1500;
const SERVICE = "apps";

const servers = [];
const providers = [];

async function startYjsServer(base, options = {}) {
  const server = new YjsServer({ host: "127.0.0.1", port: 0, dsServerUrl: base, ...options });
  servers.push(server);
  return `${await within("the Yjs server to start", server.start())}/v1/yjs/${SERVICE}`;
}

/** A Y.Doc with its provider (and awareness) connected to `docId` through `yjsBase`. */
function client(name, yjsBase, docId) {
  const doc = new Y.Doc();
  const awareness = new Awareness(doc);
  const errors = [];
  const provider = new YjsProvider({ doc, awareness, baseUrl: yjsBase, docId });
  provider.on("error", (e) => errors.push(e));
  providers.push(provider);
  const text = () => doc.getText("content").toString();
  return { name, doc, awareness, provider, errors, text };
}

/** Throws when `c`'s provider reported an error. */
function failedProvider(c) {
  if (c.errors.length > 0) {
    const e = c.errors[0];
    throw new CheckFailed(`${c.name}'s provider failed: ${e?.message ?? e}`);
  }
}

function onDocUpdate(c) {
  return (listener) => {
    c.doc.on("update", listener);
    return () => c.doc.off("update", listener);
  };
}

async function synced(c) {
  await until(
    `${c.name} to sync`,
    () => {
      failedProvider(c);
      return c.provider.synced;
    },
    (listener) => {
      c.provider.on("synced", listener);
      c.provider.on("error", listener);
      return () => {
        c.provider.off("synced", listener);
        c.provider.off("error", listener);
      };
    },
  );
}

/** Waits until `c`'s text is `want`. */
async function textIs(c, want, why) {
  await until(
    `${c.name}'s text to be ${JSON.stringify(want.length > 60 ? `${want.slice(0, 60)}…` : want)} (${why})`,
    () => {
      failedProvider(c);
      return c.text() === want;
    },
    onDocUpdate(c),
  );
}

/** The redirect of `?offset=snapshot`: `{ status, offset }`. */
async function discover(yjsBase, docId) {
  const response = await fetch(`${yjsBase}/docs/${docId}?offset=snapshot`, { redirect: "manual" });
  await response.arrayBuffer();
  const location = response.headers.get("location");
  const offset = location ? new URL(location, yjsBase).searchParams.get("offset") : null;
  return { status: response.status, offset };
}

/** Polls the snapshot redirect until it names a snapshot; returns its key. */
async function snapshotKey(yjsBase, docId) {
  let last;
  return within(
    "the Yjs server to write a snapshot",
    (async () => {
      for (;;) {
        last = await discover(yjsBase, docId);
        if (last.status === 307 && last.offset?.endsWith("_snapshot")) return last.offset;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })(),
  );
}

/** The document's tail offset (HEAD of its updates stream, through the Yjs server). */
async function tailOffset(yjsBase, docId) {
  const response = await fetch(`${yjsBase}/docs/${docId}`, { method: "HEAD" });
  expect(response.ok, `HEAD of document ${docId} answered ${response.status}`);
  return response.headers.get("stream-next-offset");
}

async function basics(base) {
  const yjsBase = await startYjsServer(base);
  const docId = uniqueName("doc");

  // Two editing clients converge.
  const alice = client("alice", yjsBase, docId);
  const bob = client("bob", yjsBase, docId);
  await Promise.all([synced(alice), synced(bob)]);
  alice.doc.getText("content").insert(0, "Hello from alice. ");
  bob.doc.getText("content").insert(0, "Hello from bob. ");
  await until(
    "alice and bob to converge on both edits",
    () => alice.text() === bob.text() && alice.text().includes("alice.") && alice.text().includes("bob."),
    (listener) => {
      const offA = onDocUpdate(alice)(listener);
      const offB = onDocUpdate(bob)(listener);
      return () => {
        offA();
        offB();
      };
    },
  );

  // Awareness from alice reaches bob.
  alice.awareness.setLocalStateField("user", { name: "alice", cursor: 3 });
  await until(
    "alice's awareness state to reach bob",
    () => bob.awareness.getStates().get(alice.doc.clientID)?.user?.name === "alice",
    (listener) => {
      bob.awareness.on("change", listener);
      return () => bob.awareness.off("change", listener);
    },
  );

  // Bob disconnects, misses edits, reconnects and catches up.
  await within("bob to disconnect", bob.provider.disconnect());
  alice.doc.getText("content").insert(alice.text().length, "Written while bob was away.");
  await within("alice's edit to be sent", alice.provider.flush());
  expect(!bob.text().includes("away"), "bob saw an edit made while he was disconnected");
  await within("bob to reconnect", bob.provider.connect());
  await textIs(bob, alice.text(), "caught up after reconnecting");

  // A late client sees everything.
  const carol = client("carol", yjsBase, docId);
  await synced(carol);
  await textIs(carol, alice.text(), "late joiner");
}

async function compaction(base) {
  const yjsBase = await startYjsServer(base, { compactionThreshold: SNAPSHOT_THRESHOLD_BYTES });
  const docId = uniqueName("compacted");
  const writer = client("the writer", yjsBase, docId);
  await synced(writer);
  const before = await discover(yjsBase, docId);
  expect(
    before.status === 307 && before.offset === "-1",
    `before any snapshot, ?offset=snapshot answered ${before.status} to offset ${before.offset}, expected 307 to -1`,
  );

  // One update past the threshold: the snapshot covers all of it.
  const big = Array.from({ length: 80 }, (_, i) => `line ${String(i).padStart(2, "0")} of the compacted text.\n`).join("");
  expect(big.length > SNAPSHOT_THRESHOLD_BYTES, "the large update is not past the threshold");
  writer.doc.getText("content").insert(0, big);
  await within("the writer's large update to be sent", writer.provider.flush());
  const key = await snapshotKey(yjsBase, docId);
  const tail = await tailOffset(yjsBase, docId);
  expectEqual("the snapshot's offset against the document's tail", key, `${tail}_snapshot`);

  // (a) Nothing came after the snapshot.
  const lateA = client("late joiner (a)", yjsBase, docId);
  await synced(lateA);
  await textIs(lateA, writer.text(), "snapshot with nothing after it");

  // (b) More updates after the snapshot.
  for (let i = 0; i < 3; i += 1) {
    writer.doc.getText("content").insert(writer.text().length, `after the snapshot ${i}.\n`);
    await within("the writer's update to be sent", writer.provider.flush());
  }
  const still = await discover(yjsBase, docId);
  expectEqual("the snapshot key before late joiner (b)", still.offset, key);
  const lateB = client("late joiner (b)", yjsBase, docId);
  await synced(lateB);
  await textIs(lateB, writer.text(), "snapshot and the updates after it");
  await textIs(lateA, writer.text(), "late joiner (a) following live");
}

await runCheck(
  "yjs",
  async (base) => {
    // Both parts run, so that one failing does not hide the other's result.
    const failures = [];
    for (const [part, run] of [
      ["sync", basics],
      ["compaction", compaction],
    ]) {
      try {
        await run(base);
      } catch (e) {
        if (!(e instanceof CheckFailed)) console.error(e?.stack ?? e);
        failures.push(`${part}: ${e?.message ?? e}`);
      }
    }
    if (failures.length > 0) throw new CheckFailed(failures.join("; "));
  },
  async () => {
    await Promise.all(providers.map((p) => p.disconnect().catch(() => {})));
    for (const p of providers) p.destroy();
    await Promise.all(servers.map((s) => s.stop().catch(() => {})));
  },
);
