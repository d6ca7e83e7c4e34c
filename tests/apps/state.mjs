// @durable-streams/state: a StreamDB round trip over a one-segment stream.
//
// Instance A writes change events (insert, update, delete) through its own
// stream handle and waits for each to come back through its consumer (by
// transaction id); instance B then loads the stream from the start and must
// hold the same rows; a last insert through A must reach B live.
//
// Usage: node state.mjs BASE_URL
import { DurableStream } from "@durable-streams/client";
import { createStateSchema } from "@durable-streams/state";
import { createStreamDB } from "@durable-streams/state/db";

import { expect, expectEqual, runCheck, uniqueName, until, within } from "./common.mjs";

/** A Standard Schema validator for `{ id: string, name: string, score: number }`. */
const userSchema = {
  "~standard": {
    version: 1,
    vendor: "strand-apps",
    validate(value) {
      const ok =
        value !== null &&
        typeof value === "object" &&
        typeof value.id === "string" &&
        typeof value.name === "string" &&
        typeof value.score === "number";
      return ok ? { value } : { issues: [{ message: `not a user: ${JSON.stringify(value)}` }] };
    },
  },
};

const schema = createStateSchema({
  users: { schema: userSchema, type: "user", primaryKey: "id" },
});

const open = [];

function openDb(url) {
  const db = createStreamDB({
    streamOptions: { url, contentType: "application/json" },
    live: "long-poll",
    state: schema,
  });
  open.push(db);
  return db;
}

/** The rows of a collection, sorted by id, without TanStack's extra fields. */
function rows(db) {
  return db.collections.users.toArray
    .map(({ id, name, score }) => ({ id, name, score }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

/** Appends one change event through `db`'s stream and waits until `db` has applied it. */
async function write(db, event) {
  const txid = crypto.randomUUID();
  event.headers = { ...event.headers, txid };
  await db.stream.append(JSON.stringify(event));
  await within(`txid ${txid} (${event.headers.operation}) back through the writer`, db.utils.awaitTxId(txid, 20_000));
}

await runCheck(
  "state",
  async (base) => {
    const url = `${base}/v1/stream/${uniqueName("apps-state")}`;
    await DurableStream.create({ url, contentType: "application/json" });

    const a = openDb(url);
    await within("instance A's preload", a.preload());
    expectEqual("instance A's rows of an empty stream", rows(a), []);

    const ada = { id: "u1", name: "Ada", score: 1 };
    const bob = { id: "u2", name: "Bob", score: 2 };
    const cyd = { id: "u3", name: "Cyd", score: 3 };
    await write(a, schema.users.insert({ value: ada }));
    await write(a, schema.users.insert({ value: bob }));
    await write(a, schema.users.insert({ value: cyd }));
    await write(a, schema.users.update({ value: { ...ada, score: 10 }, oldValue: ada }));
    await write(a, schema.users.delete({ key: "u2", oldValue: bob }));
    const expected = [
      { id: "u1", name: "Ada", score: 10 },
      { id: "u3", name: "Cyd", score: 3 },
    ];
    expectEqual("instance A's rows after insert, update, delete", rows(a), expected);

    const b = openDb(url);
    await within("instance B's preload", b.preload());
    expectEqual("instance B's materialised rows", rows(b), expected);

    // A live change: B is subscribed before A writes it.
    const dee = { id: "u4", name: "Dee", score: 4 };
    const seenByB = until(
      "instance B to see u4 live",
      () => b.collections.users.get("u4")?.name === "Dee",
      (listener) => {
        const subscription = b.collections.users.subscribeChanges(listener);
        return () => subscription.unsubscribe();
      },
    );
    await write(a, schema.users.insert({ value: dee }));
    await seenByB;
    expectEqual("instance B's rows after the live insert", rows(b), [...expected, dee]);
    expect(a.offset === b.offset, `A read up to ${a.offset}, B up to ${b.offset}`);
  },
  async () => {
    for (const db of open) db.close();
  },
);
