// @durable-streams/client: the official TypeScript client's reads of a
// text stream whose lines begin with spaces, through catch-up, long-poll
// and SSE. An SSE client drops one space after `data:`, so a server that
// wrote `data:` straight before such a line lost its first space.
//
// Usage: node client.mjs BASE_URL
import { DurableStream } from "@durable-streams/client";

import { expectEqual, runCheck, uniqueName, within } from "./common.mjs";

const TEXT = " two\n  lines\n\tand a tab\nplain";

/** Reads the stream with `live` until `want` bytes of text arrived. */
async function readText(stream, live, want) {
  const res = await stream.stream({ offset: "-1", live });
  let text = "";
  const done = new Promise((resolve) => {
    res.subscribeText(async (chunk) => {
      text += chunk.text;
      if (text.length >= want) resolve();
    });
  });
  await within(`${live} read of ${want} characters`, done);
  res.cancel();
  return text;
}

await runCheck("client", async (base) => {
  const url = `${base}/v1/stream/${uniqueName("apps/client/spaces")}`;
  const stream = await DurableStream.create({ url, contentType: "text/plain" });
  await stream.append(TEXT);
  const catchUp = await (await stream.stream({ offset: "-1", live: false })).text();
  expectEqual("catch-up text", catchUp, TEXT);
  expectEqual("long-poll text", await readText(stream, "long-poll", TEXT.length), TEXT);
  expectEqual("SSE text", await readText(stream, "sse", TEXT.length), TEXT);
});
