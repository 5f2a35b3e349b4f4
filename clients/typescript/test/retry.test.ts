// Retries of the TypeScript client, with a scripted fetch (no server).
import assert from "node:assert/strict";
import { test } from "node:test";

import { MemstackApiError, MemstackClient, retryAfterMs } from "../src/index.js";

const LISTED = { memories: [], next_cursor: null };

function scripted(...steps: (Response | Error)[]) {
  const sent: Request[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    sent.push(request);
    const step = steps.shift()!;
    if (step instanceof Error) throw step;
    return step;
  };
  return { sent, fetch: fetch as typeof globalThis.fetch };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
const throttled = (retryAfter?: string) =>
  json(429, { error: { code: "rate_limited", message: "slow down", details: [] } }, retryAfter ? { "Retry-After": retryAfter } : {});

test("429 waits at least Retry-After, then succeeds", async () => {
  const waits: number[] = [];
  const { sent, fetch } = scripted(throttled("2"), json(200, LISTED));
  const client = new MemstackClient({ baseUrl: "http://x", apiKey: "k", fetch, sleep: async (ms) => void waits.push(ms) });
  assert.deepEqual((await client.list({ user_id: "ann" })).memories, []);
  assert.equal(sent.length, 2);
  assert.ok(waits[0]! >= 2000 && waits[0]! <= 2000 + 250);
  assert.equal(sent[1]!.headers.get("authorization"), "Bearer k");
});

test("503 backs off with jitter and gives up after maxAttempts with the API's error", async () => {
  const waits: number[] = [];
  const unavailable = () => json(503, { error: { code: "dependency_failed", message: "model down", details: [] } });
  const { sent, fetch } = scripted(unavailable(), unavailable(), unavailable());
  const client = new MemstackClient({ baseUrl: "http://x", fetch, maxAttempts: 3, baseDelayMs: 100, sleep: async (ms) => void waits.push(ms) });
  await assert.rejects(client.search({ user_id: "ann", query: "x" }), { status: 503, code: "dependency_failed" });
  assert.equal(sent.length, 3);
  waits.forEach((w, n) => assert.ok(w >= 0 && w <= 100 * 2 ** n));
});

test("an update is not retried after an ambiguous failure; a read is", async () => {
  const gatewayTimeout = () => json(504, { message: "Endpoint request timed out" });
  let script = scripted(gatewayTimeout());
  let client = new MemstackClient({ baseUrl: "http://x", fetch: script.fetch, sleep: async () => {} });
  await assert.rejects(client.update("m1", { user_id: "ann", content: "x" }), { status: 504, code: "http_error" });
  assert.equal(script.sent.length, 1);
  script = scripted(gatewayTimeout(), new TypeError("socket hang up"), json(200, LISTED));
  client = new MemstackClient({ baseUrl: "http://x", fetch: script.fetch, sleep: async () => {} });
  await client.list({ user_id: "ann" });
  assert.equal(script.sent.length, 3);
});

test("an add gives every message an id, and its retry sends the same body", async () => {
  const added = { accepted: ["?"], stored: ["?"], queued: 0, status: "stored" };
  const { sent, fetch } = scripted(new TypeError("connection reset"), json(202, added));
  const client = new MemstackClient({ baseUrl: "http://x", fetch, sleep: async () => {} });
  await client.add({ user_id: "ann", messages: [{ role: "user", content: "I like tea." }] });
  const [first, second] = await Promise.all(sent.map((r) => r.json()));
  assert.deepEqual(first, second);
  assert.match(first.messages[0].id, /^[0-9a-f]{32}$/);
});

test("no answer at all is a connection_error", async () => {
  const { fetch } = scripted(new TypeError("refused"), new TypeError("refused"));
  const client = new MemstackClient({ baseUrl: "http://x", fetch, maxAttempts: 2, sleep: async () => {} });
  await assert.rejects(client.health(), (err: unknown) => err instanceof MemstackApiError && err.status === 0 && err.code === "connection_error");
});

test("Retry-After as seconds or an HTTP date", () => {
  const now = Date.parse("2024-05-01T12:00:00Z");
  assert.equal(retryAfterMs("3"), 3000);
  assert.equal(retryAfterMs("Wed, 01 May 2024 12:00:30 GMT", now), 30_000);
  assert.equal(retryAfterMs(null), undefined);
  assert.equal(retryAfterMs("soon"), undefined);
});
