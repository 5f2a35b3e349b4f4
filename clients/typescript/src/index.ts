/**
 * memstack's REST API from TypeScript, typed from the API's own OpenAPI document.
 *
 * `schema.d.ts` is generated from `openapi.json` (`memstack openapi > openapi.json`,
 * then `npm run generate`); `openapi-fetch` turns those types into a fetch client.
 * `MemstackClient` adds what every caller needs on top: the credential, retries with
 * jittered backoff that honour `Retry-After`, a timeout, and one error type carrying
 * the API's machine-readable code.
 *
 *     const memstack = new MemstackClient({ baseUrl: "http://127.0.0.1:8000", apiKey: "dev-key" });
 *     await memstack.add({ user_id: "ann", messages: [{ role: "user", content: "I moved to Osaka." }], sync: true });
 *     const { results } = await memstack.search({ user_id: "ann", query: "where does Ann live?" });
 */
import createClient, { type Client } from "openapi-fetch";

import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Schemas = components["schemas"];
export type Memory = Schemas["Memory"];
export type SearchResult = Schemas["SearchResultItem"];
export type TenantConfig = Schemas["TenantConfig"];
/** `{ topic: "food" }` (equality) or `{ topic: { in: ["food", "travel"] } }` (any of them); every key must match. */
export type JobStatus = Schemas["JobStatusResponse"];
export type MetadataFilter = NonNullable<NonNullable<Schemas["SearchFilters"]["metadata"]>>;

export interface MemstackOptions {
  baseUrl: string;
  /** An API key of `memstack serve` (sent as `Authorization: Bearer <key>`). */
  apiKey?: string;
  /** Extra headers on every request (for example a signed `Authorization` from your own signer). */
  headers?: Record<string, string>;
  /** Milliseconds one attempt may take (default 30 000). */
  timeoutMs?: number;
  /** Attempts in all, the first included (default 4; 1 never retries). */
  maxAttempts?: number;
  /** Backoff: a random wait in [0, baseDelayMs * 2^n], at most maxDelayMs (defaults 250, 8000). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How to wait (tests replace it). */
  sleep?: (ms: number) => Promise<void>;
}

/** An error answer of the API (or no answer: `code` "connection_error" / "timeout", `status` 0). */
export class MemstackApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown>[] = [],
    readonly requestId?: string,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "MemstackApiError";
  }
}

// 507: the server's disk is full and it stored nothing (like 503, it did not do it).
const RETRIED = new Set([429, 503, 507]);
const RETRIED_WHEN_IDEMPOTENT = new Set([502, 504]);

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date; undefined when absent. */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, when - now);
}

function isIdempotent(request: Request): boolean {
  const path = new URL(request.url).pathname;
  if (request.method === "GET" || request.method === "PUT") return true;
  // A merge patch applied twice leaves the same configuration.
  if (request.method === "PATCH" && path.endsWith("/v1/config")) return true;
  if (request.method === "DELETE") return path.startsWith("/v1/users/");
  // an import keeps the records' ids: sent again, it skips what it wrote.
  if (request.method === "POST" && /^\/v1\/users\/[^/]+\/import$/.test(path)) return true;
  // search reads; an add whose messages carry ids stores nothing twice (this client sets them).
  return request.method === "POST" && (path.endsWith("/v1/memories/search") || path.endsWith("/v1/memories"));
}

/** A fetch that retries throttling, unavailable dependencies and broken connections. */
function retryingFetch(options: Required<Pick<MemstackOptions, "maxAttempts" | "baseDelayMs" | "maxDelayMs" | "timeoutMs">> & {
  fetch: typeof fetch;
  sleep: (ms: number) => Promise<void>;
}): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const original = new Request(input, init);
    const body = original.body ? await original.arrayBuffer() : undefined;
    const idempotent = isIdempotent(original);
    for (let attempt = 1; ; attempt++) {
      const backoff = Math.random() * Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (attempt - 1));
      const last = attempt >= options.maxAttempts;
      let response: Response;
      try {
        response = await options.fetch(new Request(original, { body, signal: AbortSignal.timeout(options.timeoutMs) }));
      } catch (error) {
        if (last || !idempotent) {
          const timedOut = error instanceof DOMException && error.name === "TimeoutError";
          throw new MemstackApiError(0, timedOut ? "timeout" : "connection_error", `could not reach ${original.url}: ${error}`);
        }
        await options.sleep(backoff);
        continue;
      }
      const retryable = RETRIED.has(response.status) || (idempotent && RETRIED_WHEN_IDEMPOTENT.has(response.status));
      if (last || !retryable) return response;
      await response.body?.cancel();
      await options.sleep((retryAfterMs(response.headers.get("retry-after")) ?? 0) + backoff);
    }
  };
}

function newId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

async function unwrap<T>(call: Promise<Answer<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok && data !== undefined) return data;
  const requestId = response.headers.get("x-request-id") ?? response.headers.get("x-amzn-requestid") ?? undefined;
  const body = error as { error?: { code?: string; message?: string; details?: Record<string, unknown>[] }; message?: string };
  if (body?.error) {
    throw new MemstackApiError(response.status, body.error.code ?? "error", body.error.message ?? "", body.error.details, requestId);
  }
  throw new MemstackApiError(response.status, "http_error", body?.message ?? response.statusText, [], requestId);
}

type Body<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;
type Query<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

type ListQuery = Omit<Query<"/v1/memories", "get">, "metadata"> & { metadata?: MetadataFilter };

export class MemstackClient {
  /** The generated, fully typed openapi-fetch client (every route, every field). */
  readonly api: Client<paths>;

  constructor(options: MemstackOptions) {
    const headers: Record<string, string> = { Accept: "application/json", ...(options.headers ?? {}) };
    if (options.apiKey) headers.Authorization = `Bearer ${options.apiKey}`;
    this.api = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers,
      fetch: retryingFetch({
        fetch: options.fetch ?? globalThis.fetch,
        sleep: options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
        maxAttempts: options.maxAttempts ?? 4,
        baseDelayMs: options.baseDelayMs ?? 250,
        maxDelayMs: options.maxDelayMs ?? 8000,
        timeoutMs: options.timeoutMs ?? 30_000,
      }),
    });
  }

  /** Store messages; every message gets an id first, so a retried add stores nothing twice. */
  add(body: Body<"/v1/memories", "post">, idempotencyKey?: string) {
    const messages = body.messages.map((m) => ({ ...m, id: m.id ?? newId() }));
    const header = idempotencyKey ? { "idempotency-key": idempotencyKey } : undefined;
    return unwrap(this.api.POST("/v1/memories", { body: { ...body, messages }, params: { header } }));
  }

  search(body: Body<"/v1/memories/search", "post">) {
    return unwrap(this.api.POST("/v1/memories/search", { body }));
  }

  /** `metadata` is the same filter object as a search's `filters.metadata` (sent as JSON text). */
  list(query: ListQuery) {
    const { metadata, ...rest } = query;
    const params = { query: { ...rest, ...(metadata ? { metadata: JSON.stringify(metadata) } : {}) } };
    return unwrap(this.api.GET("/v1/memories", { params }));
  }

  get(memoryId: string, userId: string) {
    return unwrap(this.api.GET("/v1/memories/{memory_id}", { params: { path: { memory_id: memoryId }, query: { user_id: userId } } }));
  }

  update(memoryId: string, body: Body<"/v1/memories/{memory_id}", "patch">) {
    return unwrap(this.api.PATCH("/v1/memories/{memory_id}", { params: { path: { memory_id: memoryId } }, body }));
  }

  delete(memoryId: string, userId: string) {
    return unwrap(this.api.DELETE("/v1/memories/{memory_id}", { params: { path: { memory_id: memoryId }, query: { user_id: userId } } }));
  }

  /** Delete every current memory of a user from one agent and/or one session (Mem0's `delete_all`). */
  deleteAll(query: Query<"/v1/memories", "delete">) {
    return unwrap(this.api.DELETE("/v1/memories", { params: { query } }));
  }

  async history(memoryId: string, userId: string): Promise<Memory[]> {
    const chain = await unwrap(
      this.api.GET("/v1/memories/{memory_id}/history", { params: { path: { memory_id: memoryId }, query: { user_id: userId } } }),
    );
    return chain.memories;
  }

  putKey(key: string, body: Body<"/v1/memories/keys/{key}", "put">) {
    return unwrap(this.api.PUT("/v1/memories/keys/{key}", { params: { path: { key } }, body }));
  }

  getKey(key: string, userId: string) {
    return unwrap(this.api.GET("/v1/memories/keys/{key}", { params: { path: { key }, query: { user_id: userId } } }));
  }

  deleteKey(key: string, userId: string) {
    return unwrap(this.api.DELETE("/v1/memories/keys/{key}", { params: { path: { key }, query: { user_id: userId } } }));
  }

  /** A page of this tenant's users (by user id), with counts per tier and the time of the last write. */
  listUsers(query: { limit?: number; cursor?: string } = {}) {
    return unwrap(this.api.GET("/v1/users", { params: { query } }));
  }

  eraseUser(userId: string) {
    return unwrap(this.api.DELETE("/v1/users/{user_id}", { params: { path: { user_id: userId } } }));
  }

  consolidate(body: Body<"/v1/consolidations", "post">) {
    return unwrap(this.api.POST("/v1/consolidations", { body }));
  }

  health() {
    return unwrap(this.api.GET("/v1/health"));
  }

  /** This tenant's configuration (custom categories, extraction instructions) and its version. */
  getConfig() {
    return unwrap(this.api.GET("/v1/config"));
  }

  /** Replace the whole configuration; `ifVersion` refuses (412) if it is no longer at that version. */
  putConfig(config: TenantConfig, ifVersion?: number) {
    return unwrap(this.api.PUT("/v1/config", { body: config, headers: versionHeader(ifVersion) }));
  }

  /** Change parts of it: a JSON merge patch (objects merge, `null` resets a key to its default). */
  patchConfig(patch: Record<string, unknown>, ifVersion?: number) {
    return unwrap(this.api.PATCH("/v1/config", { body: patch, headers: versionHeader(ifVersion) }));
  }

  /** One job's state (`queued`, `running`, `done`, `failed` with its `error`); an add's `job_ids` name its jobs. */
  job(jobId: string) {
    return unwrap(this.api.GET("/v1/jobs/{job_id}", { params: { path: { job_id: jobId } } }));
  }

  /**
   * Ask for each job's state until every one is done or failed; their last states, in the order given.
   * A failed job is returned (its `error` says why), not thrown; an Error names the jobs still unfinished
   * after `timeoutMs`.
   */
  async waitForJobs(jobIds: string[], options: { timeoutMs?: number; pollMs?: number } = {}): Promise<JobStatus[]> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    const states = new Map<string, JobStatus>();
    const unfinished = () => jobIds.filter((id) => !["done", "failed"].includes(states.get(id)?.status ?? ""));
    for (;;) {
      for (const id of unfinished()) states.set(id, await this.job(id));
      const left = unfinished();
      if (left.length === 0) return jobIds.map((id) => states.get(id) as JobStatus);
      if (Date.now() >= deadline) {
        throw new Error(`jobs not finished in time: ${left.map((id) => `${id} (${states.get(id)?.status})`).join(", ")}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(options.pollMs ?? 500, deadline - Date.now())));
    }
  }

  /**
   * A user's export as lines (a header, then every record with its embedding), page after page:
   * `memstack serve` streams it whole, behind API Gateway each answer is a page and this follows
   * its `next_cursor`. Save the lines as a file for `memstack import`, or pass them to `importUser`.
   */
  async *exportUser(userId: string, options: { embeddings?: boolean; pageSize?: number } = {}): AsyncGenerator<string> {
    let cursor: string | undefined;
    let first = true;
    do {
      const query = { cursor, limit: options.pageSize, embeddings: options.embeddings };
      const { data, error, response } = await this.api.GET("/v1/users/{user_id}/export", {
        params: { path: { user_id: userId }, query },
        headers: { Accept: NDJSON },
        parseAs: "stream",
      });
      if (!response.ok || !data) await unwrap(Promise.resolve({ data: undefined, error: await errorOf(response, error), response }));
      const lines = readLines(data as ReadableStream<Uint8Array>);
      const head = await lines.next();
      if (head.done) throw new MemstackApiError(0, "connection_error", "the export answer is empty");
      const { next_cursor: next, ...header } = JSON.parse(head.value) as { next_cursor?: string | null };
      cursor = next ?? undefined;
      if (first) yield JSON.stringify(header);
      first = false;
      yield* lines;
    } while (cursor);
  }

  /**
   * Import an export's lines as `userId`, in requests of about `requestBytes` (each with the header
   * line): every request is checked whole before anything is written, and what is there is skipped.
   */
  async importUser(userId: string, lines: Iterable<string> | AsyncIterable<string>, options: { requestBytes?: number } = {}) {
    const limit = options.requestBytes ?? 512 * 1024;
    const total = { user_id: userId, imported: 0, skipped_existing: 0, reembedded: 0 };
    let header: string | undefined;
    let batch: string[] = [];
    let size = 0;
    const send = async () => {
      const answer = await unwrap(
        this.api.POST("/v1/users/{user_id}/import", {
          params: { path: { user_id: userId } },
          body: [header, ...batch].join("\n") + "\n",
          bodySerializer: (body: unknown) => body as string,
          headers: { "Content-Type": NDJSON },
        }),
      );
      total.imported += answer.imported;
      total.skipped_existing += answer.skipped_existing;
      total.reembedded += answer.reembedded;
      batch = [];
      size = 0;
    };
    for await (const raw of lines) {
      const line = raw.trim();
      if (!line) continue;
      if (header === undefined) {
        header = line;
        continue;
      }
      const bytes = new TextEncoder().encode(line).length + 1;
      if (batch.length && size + bytes > limit) await send();
      batch.push(line);
      size += bytes;
    }
    if (header === undefined) throw new Error("the export is empty (no header line)");
    if (batch.length) await send();
    return total;
  }
}

const NDJSON = "application/x-ndjson";

/** The error body of a failed answer (openapi-fetch leaves it unread when asked for a stream). */
async function errorOf(response: Response, error: unknown): Promise<unknown> {
  if (error !== undefined) return error;
  try {
    return await response.json();
  } catch {
    return undefined;
  }
}

/** The non-empty lines of a byte stream, as they arrive. */
async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let rest = "";
  const reader = stream.getReader();
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new MemstackApiError(0, "connection_error", `the export was cut off: ${error}`);
      }
      if (chunk.done) break;
      rest += decoder.decode(chunk.value, { stream: true });
      const lines = rest.split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) yield line;
    }
    rest += decoder.decode();
    if (rest.trim()) yield rest;
  } finally {
    reader.releaseLock();
  }
}

function versionHeader(ifVersion?: number): Record<string, string> | undefined {
  return ifVersion === undefined ? undefined : { "If-Match": `"${ifVersion}"` };
}
