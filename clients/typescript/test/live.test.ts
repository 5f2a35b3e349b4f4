// The TypeScript client against a live `memstack serve` (a free port, a throwaway data directory).
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { MemstackApiError, MemstackClient } from "../src/index.js";
import { startServer } from "./server.js";

const python = process.env.MEMSTACK_PYTHON ?? "python3";
let server: ChildProcess;
let baseUrl: string;
let dataDir: string;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "memstack-ts-"));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("MEMSTACK_")) env[k] = v;
  Object.assign(env, {
    MEMSTACK_DATA_DIR: join(dataDir, "data"),
    MEMSTACK_EMBEDDER: "hashing",
    MEMSTACK_API_KEYS: "ts-key=ts,other-key=other",
    COLUMNS: "200",
  });
  ({ server, baseUrl } = await startServer(python, ["-m", "memstack", "serve", "--port", "0", "--threads", "4"], env));
});

after(async () => {
  if (!server) return; // the start failed: before() said why
  const exited = new Promise((resolve) => server.once("exit", resolve));
  server.kill("SIGINT");
  await exited;
  rmSync(dataDir, { recursive: true, force: true });
});

test("every route, typed, against the live server", async () => {
  const memstack = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  assert.equal((await memstack.health()).status, "ok");

  const added = await memstack.add({
    user_id: "ann",
    sync: true,
    messages: [
      { role: "user", content: "I moved to Lisbon last spring." },
      { role: "user", content: "I am allergic to peanuts." },
    ],
  });
  assert.equal(added.status, "processed");
  assert.equal(added.stored.length, 2);

  const found = await memstack.search({ user_id: "ann", query: "where does Ann live", top_k: 5, explain: true });
  const lisbon = found.results.find((r) => r.tier === "ltm" && r.content.includes("Lisbon"));
  assert.ok(lisbon, JSON.stringify(found.results));
  assert.ok(lisbon.stages && typeof lisbon.score === "number");

  const page = await memstack.list({ user_id: "ann", tier: "ltm", limit: 10 });
  assert.ok(page.memories.some((m) => m.id === lisbon.id));
  assert.equal((await memstack.get(lisbon.id, "ann")).content, lisbon.content);

  const edited = await memstack.update(lisbon.id, { user_id: "ann", content: "Ann lives in Porto." });
  assert.equal(edited.replaces_id, lisbon.id);
  assert.deepEqual((await memstack.history(edited.id, "ann")).map((m) => m.version), [1, 2]);
  const deleted = await memstack.delete(edited.id, "ann");
  assert.equal(deleted.deleted, true);

  const keyed = await memstack.putKey("diet", { user_id: "ann", content: "Ann is vegetarian.", kind: "preference" });
  assert.equal(keyed.version, 1);
  assert.equal((await memstack.putKey("diet", { user_id: "ann", content: "Ann is vegan." })).version, 2);
  assert.equal((await memstack.getKey("diet", "ann")).content, "Ann is vegan.");
  await memstack.deleteKey("diet", "ann");

  const report = await memstack.consolidate({ user_id: "ann", sync: true });
  assert.equal(report.user_id, "ann");
  const users = await memstack.listUsers({ limit: 10 });
  const ann = users.users.find((u) => u.user_id === "ann");
  assert.ok(ann && ann.counts.stm + ann.counts.ltm > 0 && ann.last_write, JSON.stringify(users));
  const erased = await memstack.eraseUser("ann");
  assert.ok(erased.erased.memories! > 0);
  assert.deepEqual((await memstack.list({ user_id: "ann" })).memories, []);
});

test("search and list filter on the agent and on metadata", async () => {
  const memstack = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const say = (content: string, agent_id: string, topic: string) =>
    memstack.add({ user_id: "cy", agent_id, infer: false, metadata: { topic }, messages: [{ role: "user", content }] });
  await say("I fly to Osaka in May.", "travel", "trip");
  await say("I cook ramen on Fridays.", "chef", "food");
  await say("I bake bread on Sundays.", "chef", "baking");

  const trips = await memstack.search({ user_id: "cy", query: "I", agent_id: "travel" });
  assert.deepEqual(trips.results.map((r) => r.content), ["I fly to Osaka in May."]);
  assert.equal(trips.results[0]!.agent_id, "travel");
  const cooking = await memstack.search({ user_id: "cy", query: "I", filters: { metadata: { topic: { in: ["food", "baking"] } } } });
  assert.deepEqual(new Set(cooking.results.map((r) => r.content)), new Set(["I cook ramen on Fridays.", "I bake bread on Sundays."]));
  const listed = await memstack.list({ user_id: "cy", agent_id: "chef", metadata: { topic: "baking" } });
  assert.deepEqual(listed.memories.map((m) => m.content), ["I bake bread on Sundays."]);
  const best = (await memstack.search({ user_id: "cy", query: "ramen" })).results[0]!.score;
  const kept = await memstack.search({ user_id: "cy", query: "ramen", min_score: best });
  assert.ok(kept.results.length > 0 && kept.results.every((r) => r.score >= best));
  await assert.rejects(
    memstack.search({ user_id: "cy", query: "I", filters: { metadata: { topic: { in: [] } } } }),
    (e: unknown) => e instanceof MemstackApiError && e.status === 422 && e.message.includes('"in" takes a list'),
  );
});

test("a metadata edit keeps the text, ttl sets an expiry; deleteAll forgets one agent's memories", async () => {
  const memstack = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  for (const [content, agent_id] of [["I swim on Mondays.", "coach"], ["I run on Fridays.", "coach"], ["I bake.", "chef"]]) {
    await memstack.add({ user_id: "dee", agent_id, infer: false, messages: [{ role: "user", content: content! }] });
  }
  const swim = (await memstack.list({ user_id: "dee" })).memories.find((m) => m.content === "I swim on Mondays.")!;
  const relabelled = await memstack.update(swim.id, { user_id: "dee", metadata: { topic: "water" } });
  assert.equal(relabelled.content, swim.content);
  assert.equal(relabelled.metadata?.topic, "water");
  assert.equal(relabelled.agent_id, "coach");
  const expiring = await memstack.update(relabelled.id, { user_id: "dee", ttl: 600 });
  assert.ok(expiring.expires_at && Date.parse(expiring.expires_at) > Date.now());
  const forever = await memstack.update(expiring.id, { user_id: "dee", expires_at: null });
  assert.equal(forever.expires_at, null);
  const gone = await memstack.deleteAll({ user_id: "dee", agent_id: "coach" });
  assert.equal(gone.deleted, 2);
  assert.deepEqual((await memstack.list({ user_id: "dee" })).memories.map((m) => m.content), ["I bake."]);
});

test("exportUser streams or pages an export, importUser loads it as another user and skips it again", async () => {
  const memstack = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  for (let n = 0; n < 12; n++) {
    await memstack.add({ user_id: "eve", infer: false, messages: [{ role: "user", content: `note ${n}: "quoted" ünïcode 🎉` }] });
  }
  const whole: string[] = [];
  for await (const line of memstack.exportUser("eve")) whole.push(line);
  const paged: string[] = [];
  for await (const line of memstack.exportUser("eve", { pageSize: 5 })) paged.push(line);
  assert.equal(whole.length, 13);
  assert.equal(whole[0], paged[0]);
  assert.deepEqual([...paged.slice(1)].sort(), [...whole.slice(1)].sort());
  const header = JSON.parse(whole[0]!);
  assert.equal(header.format, "memstack-export");
  assert.equal(header.user_id, "eve");
  assert.ok(!("next_cursor" in header) && !("tenant" in header));

  const report = await memstack.importUser("fay", paged, { requestBytes: 2048 });
  assert.deepEqual(report, { user_id: "fay", imported: 12, skipped_existing: 0, reembedded: 0 });
  const again = await memstack.importUser("fay", whole);
  assert.deepEqual(again, { user_id: "fay", imported: 0, skipped_existing: 12, reembedded: 0 });
  const copied = (await memstack.list({ user_id: "fay", limit: 50 })).memories.map((m) => m.content).sort();
  assert.deepEqual(copied, whole.slice(1).map((l) => JSON.parse(l).content).sort());

  await assert.rejects(
    (async () => {
      for await (const _ of memstack.exportUser("nobody")) void _;
    })(),
    { status: 404, code: "not_found" },
  );
  await assert.rejects(memstack.importUser("fay", [whole[0]!, '{"id": "bad id"}']), { status: 422, code: "validation_error" });
});

test("errors carry the API's code, and tenants stay apart", async () => {
  const ts = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const other = new MemstackClient({ baseUrl, apiKey: "other-key" });
  await ts.add({ user_id: "bob", messages: [{ role: "user", content: "My locker code is 4411." }], infer: false });
  assert.deepEqual((await other.search({ user_id: "bob", query: "locker code" })).results, []);

  await assert.rejects(ts.get("no-such-id", "bob"), (err: unknown) => {
    assert.ok(err instanceof MemstackApiError);
    assert.equal(err.status, 404);
    assert.equal(err.code, "not_found");
    assert.ok(err.requestId);
    return true;
  });
  await assert.rejects(ts.search({ user_id: "bob", query: "   " }), (err: unknown) => {
    assert.ok(err instanceof MemstackApiError && err.code === "validation_error");
    assert.equal(err.details[0]!.field, "query");
    return true;
  });
  const stranger = new MemstackClient({ baseUrl, apiKey: "stolen" });
  await assert.rejects(stranger.health().then(() => stranger.list({ user_id: "bob" })), { code: "unauthorized", status: 401 });
});

test("the tenant configuration: read, replace, merge, If-Match, per tenant", async () => {
  const ts = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const other = new MemstackClient({ baseUrl, apiKey: "other-key" });
  assert.equal((await ts.getConfig()).version, 0);
  const pets = { name: "pets", description: "the user's pets", keywords: ["dog", "cat"] };
  const put = await ts.putConfig({ categories: { mode: "extend", custom: [pets] } });
  assert.equal(put.version, 1);
  const patched = await ts.patchConfig({ extraction: { ignore: { categories: ["pets"] } } }, 1);
  assert.deepEqual(patched.config.categories?.custom, [pets]);
  assert.deepEqual(patched.config.extraction?.ignore?.categories, ["pets"]);
  await assert.rejects(ts.patchConfig({ extraction: null }, 1), { code: "precondition_failed", status: 412 });
  await assert.rejects(ts.patchConfig({ categories: { custom: [{ ...pets, name: "Pets!" }] } }), (err: unknown) => {
    assert.ok(err instanceof MemstackApiError && err.code === "validation_error");
    assert.equal(err.details[0]!.field, "categories.custom[0].name");
    return true;
  });
  assert.equal((await other.getConfig()).version, 0); // another tenant's is its own
  assert.deepEqual((await ts.patchConfig({ extraction: null })).config.extraction?.ignore?.categories, []);
});

test("custom categories and extraction rules: extraction files under them, list and search filter on them", async () => {
  const ts = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const pets = { name: "pets", description: "the user's pets and their care", keywords: ["dog", "vet"] };
  await ts.putConfig({ categories: { custom: [pets] }, extraction: { ignore: { categories: ["health"], keywords: ["password"] } } });
  const turns = ["I took my dog Biscuit to the vet.", "I was diagnosed with asthma.", "My password is hunter2.", "I play the cello."];
  const added = await ts.add({ user_id: "kit", sync: true, messages: turns.map((content) => ({ role: "user" as const, content })) });
  assert.equal(added.status, "processed");
  const pet = (await ts.list({ user_id: "kit", tier: "ltm", category: "pets" })).memories;
  assert.deepEqual(pet.map((m) => m.category), ["pets"]);
  assert.match(pet[0]!.content, /Biscuit/);
  const kept = (await ts.list({ user_id: "kit", tier: "ltm" })).memories.map((m) => m.content).join(" ");
  assert.match(kept, /cello/);
  assert.doesNotMatch(kept, /asthma|hunter2/); // the rules hold what extraction stores
  const found = await ts.search({ user_id: "kit", query: "Biscuit the dog", filters: { category: "pets" } });
  assert.deepEqual(found.results.map((r) => r.id), [pet[0]!.id]);
  await assert.rejects(ts.list({ user_id: "kit", category: "cars" }), (err: unknown) => {
    assert.ok(err instanceof MemstackApiError && err.status === 422 && err.code === "validation_error");
    assert.match(err.message, /'cars' is not a category of this tenant/);
    return true;
  });
  await ts.putConfig({}); // back to the defaults for the tests that follow
});

test("an add names its jobs, waitForJobs follows them to done; another tenant's job is not found", async () => {
  const ts = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const other = new MemstackClient({ baseUrl, apiKey: "other-key" });
  const added = await ts.add({ user_id: "jo", messages: [{ role: "user", content: "I moved to Porto in May." }] });
  const jobIds = added.job_ids ?? [];
  assert.equal(jobIds.length, 1);
  assert.equal((await ts.job(jobIds[0]!)).type, "extract");
  const [state] = await ts.waitForJobs(jobIds, { timeoutMs: 60_000, pollMs: 100 });
  assert.equal(state!.status, "done");
  assert.equal(state!.user_id, "jo");
  await assert.rejects(other.job(jobIds[0]!), { code: "not_found", status: 404 });
});

test("the raw generated client reaches every route too", async () => {
  const memstack = new MemstackClient({ baseUrl, apiKey: "ts-key" });
  const { data, response } = await memstack.api.GET("/v1/memories", { params: { query: { user_id: "bob", limit: 1 } } });
  assert.equal(response.status, 200);
  assert.equal(data!.memories.length, 1);
});
