// A server that cannot start says why at once (its stderr) and leaves no timer behind.
import assert from "node:assert/strict";
import { test } from "node:test";

import { startServer } from "./server.js";

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
}

test("a failed start rejects with the server's stderr and clears its timer", async () => {
  const before = timers();
  // node refuses `-m`: an exit with a reason on stderr, as python without memstack installed.
  await assert.rejects(startServer(process.execPath, ["-m", "memstack", "serve"], { ...process.env } as Record<string, string>), (e: unknown) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /memstack serve exited \(\d+\): .*bad option/s);
    return true;
  });
  assert.equal(timers(), before);
});

test("a command that does not exist says which and what to set", async () => {
  await assert.rejects(startServer("/no/such/python", ["-m", "memstack"], {}), /could not run \/no\/such\/python.*MEMSTACK_PYTHON/s);
});
