/**
 * A restarted member keeps its port (process backend): between two attempts (the restart backoff) the port
 * stays reserved, so another process cannot take it and make the next attempt fail with EADDRINUSE. Real
 * child processes, the real scheduler and the real port allocator.
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { expect, it } from "vitest";
import { runCohort } from "./process-helpers";

const sh = (script: string) => ["sh", "-c", script];

/** Tries to listen on 127.0.0.1:`port`; resolves with the server when it could, else null. */
function grab(port: number): Promise<net.Server | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(null));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(server));
  });
}

it("during the restart backoff a stranger cannot take the member's port; the second attempt binds it and the run succeeds", async () => {
  const server = `require("http").createServer((q,s)=>s.end("ok")).listen(+process.env.COHORT_PORT,"127.0.0.1")`;
  let runDir = "";
  let strangerGotIt = false;
  let tries = 0;
  const stranger = (async () => {
    while (
      runDir === "" ||
      !fs.existsSync(path.join(runDir, "records.ndjson")) ||
      !fs.readFileSync(path.join(runDir, "records.ndjson"), "utf8").includes('"kind":"member-exited"')
    ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await new Promise((resolve) => setTimeout(resolve, 150)); // the backend's stop of the failed attempt has finished
    const port = Number(fs.readFileSync(path.join(runDir, "members", "gw-0", "port"), "utf8"));
    const until = Date.now() + 600; // well inside the 1.5 s backoff
    while (Date.now() < until) {
      tries++;
      const held = await grab(port);
      if (held !== null) {
        strangerGotIt = true;
        await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the backoff: the restart meets it
        await new Promise((resolve) => held.close(resolve));
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const { result, records } = await runCohort(
    [
      {
        name: "gw",
        app: { command: sh(`if [ -e started-once ]; then exec "${process.execPath}" -e '${server}'; fi; : > started-once; echo "$COHORT_PORT" > port; exit 1`) },
        readiness: { http: { path: "/" } },
        restart: { attempts: 1, backoff: "1500ms" },
      },
    ],
    { hold: "100ms" },
    { onRunDir: (dir) => (runDir = dir) },
  );
  await stranger;
  expect(tries).toBeGreaterThan(0);
  expect(strangerGotIt).toBe(false);
  expect(result).toMatchObject({ outcome: "succeeded", readyCount: 1 });
  const starts = records.filter((r) => r.kind === "member-started");
  expect(starts).toHaveLength(2);
  expect(starts[1]!.port).toBe(starts[0]!.port);
});
