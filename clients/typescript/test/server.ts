// Starts `memstack serve` for the live tests and resolves with its URL.
import { type ChildProcess, spawn } from "node:child_process";

export type Started = { server: ChildProcess; baseUrl: string };

/**
 * Spawns `command args` and waits for the "memstack API on http://…" line. A server that exits
 * first rejects at once with its stderr (the reason: a missing venv, a bad flag), and the start
 * timer is cleared either way, so a failed start never holds the test run open.
 */
export function startServer(command: string, args: string[], env: Record<string, string>, timeoutMs = 120_000): Promise<Started> {
  const server = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise<Started>((resolve, reject) => {
    let seen = "";
    let errors = "";
    const timer = setTimeout(() => {
      server.kill("SIGKILL");
      reject(new Error(`memstack serve did not start in ${timeoutMs} ms: ${seen}${errors}`));
    }, timeoutMs);
    const fail = (why: string) => {
      clearTimeout(timer);
      reject(new Error(`${why}: ${errors.trim() || seen.trim() || "(no output)"}`));
    };
    server.stderr!.on("data", (chunk: Buffer) => {
      errors += chunk.toString();
    });
    server.stdout!.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const match = /memstack API on (http:\/\/[\d.]+:\d+)/.exec(seen);
      if (match) {
        clearTimeout(timer);
        resolve({ server, baseUrl: match[1]! });
      }
    });
    server.on("error", (err) => fail(`could not run ${command} (${err.message}); set MEMSTACK_PYTHON to the venv's python`));
    server.on("exit", (code) => fail(`memstack serve exited (${code})`));
  });
}
