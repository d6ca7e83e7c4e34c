// @durable-streams/aisdk-transport with the AI SDK (`ai` 6): a resumable chat
// whose generation is written to a durable stream `chat/{chatId}/{uuid}`.
//
// A small chat API runs in this process on loopback (POST /api/chat starts a
// generation with `streamText` over the AI SDK's mock language model and
// hands it to `toDurableStreamResponse`; GET /api/chat/{id}/stream points at
// the active generation's stream). The mock model emits a known sequence of
// text deltas, each released by the check: the first reader (the transport's
// `sendMessages`) receives the first half, then a second reader resumes
// (`reconnectToStream`) mid-generation, the rest is released, and both must
// receive every chunk exactly once, in order, ending with `finish`. No real
// model, and nothing leaves loopback.
//
// Usage: node aisdk.mjs BASE_URL
import { createServer } from "node:http";

import { createDurableChatTransport, toDurableStreamResponse } from "@durable-streams/aisdk-transport";
import { convertToModelMessages, streamText } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { deferred, expect, expectEqual, runCheck, uniqueName, until, within } from "./common.mjs";

const DELTAS = ["Durable ", "streams ", "keep ", "every ", "token ", "of ", "this ", "answer."];
const HALF = DELTAS.length / 2;

/** The mock model: one generation whose parts the check releases one by one. */
function pacedModel() {
  const opened = deferred();
  const model = new MockLanguageModelV3({
    doStream: async () => ({
      stream: new ReadableStream({
        start(controller) {
          opened.resolve(controller);
        },
      }),
    }),
  });
  let controller;
  return {
    model,
    async release(part) {
      controller ??= await within("the mock model's stream to open", opened.promise);
      controller.enqueue(part);
    },
    async end() {
      controller ??= await within("the mock model's stream to open", opened.promise);
      controller.close();
    },
  };
}

/** Collects a reader's UI message chunks; `changed` listeners run after each. */
function collect(name, stream) {
  const chunks = [];
  const listeners = new Set();
  const done = (async () => {
    const reader = stream.getReader();
    for (;;) {
      const { done: finished, value } = await reader.read();
      if (finished) return chunks;
      chunks.push(value);
      for (const listener of listeners) listener();
    }
  })();
  return {
    name,
    chunks,
    done,
    deltas: () => chunks.filter((c) => c.type === "text-delta").map((c) => c.delta),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Serves `handler(Request) -> Response` on a loopback port. */
async function serve(handler) {
  const server = createServer(async (req, res) => {
    try {
      const body = [];
      for await (const piece of req) body.push(piece);
      const request = new Request(`http://127.0.0.1${req.url}`, {
        method: req.method,
        headers: req.headers,
        body: body.length > 0 ? Buffer.concat(body) : undefined,
      });
      const response = await handler(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (e) {
      console.error(e?.stack ?? e);
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(`the chat API failed: ${e?.message ?? e}`);
    }
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return server;
}

let apiServer;

await runCheck(
  "aisdk",
  async (base) => {
    const paced = pacedModel();
    const active = new Map();
    const written = deferred();

    apiServer = await serve(async (request) => {
      const { pathname } = new URL(request.url);
      const resume = pathname.match(/^\/api\/chat\/([^/]+)\/stream$/);
      if (request.method === "GET" && resume) {
        const streamUrl = active.get(resume[1]);
        if (!streamUrl) return new Response(null, { status: 204 });
        return Response.json({ streamUrl }, { status: 200, headers: { Location: streamUrl } });
      }
      if (request.method === "POST" && pathname === "/api/chat") {
        const { id, messages } = await request.json();
        const streamUrl = `${base}/v1/stream/chat/${id}/${crypto.randomUUID()}`;
        active.set(id, streamUrl);
        const result = streamText({
          model: paced.model,
          messages: await convertToModelMessages(messages),
        });
        return toDurableStreamResponse({
          source: result.toUIMessageStream({ originalMessages: messages }),
          stream: { writeUrl: streamUrl },
          waitUntil: (task) => written.resolve(task),
        });
      }
      return new Response("not found", { status: 404 });
    });
    const api = `http://127.0.0.1:${apiServer.address().port}/api/chat`;
    const transport = createDurableChatTransport({ api });
    const chatId = uniqueName("chat");
    const messages = [{ id: "m1", role: "user", parts: [{ type: "text", text: "Say something." }] }];

    const first = collect(
      "the first reader",
      await within(
        "sendMessages",
        transport.sendMessages({
          trigger: "submit-message",
          chatId,
          messageId: undefined,
          messages,
          abortSignal: new AbortController().signal,
        }),
      ),
    );

    await paced.release({ type: "stream-start", warnings: [] });
    await paced.release({ type: "text-start", id: "t1" });
    for (const delta of DELTAS.slice(0, HALF)) {
      await paced.release({ type: "text-delta", id: "t1", delta });
    }
    await until(
      `the first reader to receive ${HALF} deltas`,
      () => first.deltas().length >= HALF,
      (l) => first.subscribe(l),
    );
    expectEqual("the first reader's deltas so far", first.deltas(), DELTAS.slice(0, HALF));

    // A second reader resumes while the generation is still open.
    const resumed = await within("reconnectToStream", transport.reconnectToStream({ chatId }));
    expect(resumed !== null, "reconnectToStream found no active generation (204)");
    const second = collect("the resumed reader", resumed);
    await until(
      `the resumed reader to catch up on ${HALF} deltas`,
      () => second.deltas().length >= HALF,
      (l) => second.subscribe(l),
    );

    for (const delta of DELTAS.slice(HALF)) {
      await paced.release({ type: "text-delta", id: "t1", delta });
    }
    await paced.release({ type: "text-end", id: "t1" });
    await paced.release({
      type: "finish",
      finishReason: { unified: "stop", raw: "stop" },
      usage: {
        inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
        outputTokens: { total: DELTAS.length, text: DELTAS.length, reasoning: 0 },
      },
    });
    await paced.end();

    const [a, b] = await within("both readers to end", Promise.all([first.done, second.done]));
    await within("the generation's write to the durable stream", written.promise);
    for (const reader of [first, second]) {
      const chunks = reader === first ? a : b;
      expectEqual(`${reader.name}'s deltas`, reader.deltas(), DELTAS);
      const types = chunks.map((c) => c.type);
      expectEqual(`${reader.name}'s chunk types`, types, [
        "start",
        "start-step",
        "text-start",
        ...DELTAS.map(() => "text-delta"),
        "text-end",
        "finish-step",
        "finish",
      ]);
    }
    expectEqual("the resumed reader's chunks against the first reader's", b, a);
  },
  async () => {
    apiServer?.closeAllConnections();
    await new Promise((resolve) => (apiServer ? apiServer.close(resolve) : resolve()));
  },
);
