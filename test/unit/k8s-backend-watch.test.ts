/**
 * The Kubernetes backend's HTTP layer against a local HTTPS endpoint that speaks the API server's list
 * and watch protocol: connection reuse (one keep-alive pool per run, not one TLS connection per call),
 * counting, resourceVersion continuity across watch re-opens, re-list on 410 Gone, bookmarks.
 */
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpMethod, KubeApiError, KubeClient, PooledKubeConfig } from "../../runtime/backends/kubernetes/client";
import { ApiCounters } from "../../runtime/backends/kubernetes/counters";
import type { Json } from "../../runtime/backends/kubernetes/render";
import { ListWatch, type CacheEvent } from "../../runtime/backends/kubernetes/watch";

let dir: string;
let cert: Buffer;
let key: Buffer;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-backend-watch-"));
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      path.join(dir, "key.pem"),
      "-out",
      path.join(dir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
  cert = fs.readFileSync(path.join(dir, "cert.pem"));
  key = fs.readFileSync(path.join(dir, "key.pem"));
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

type Handler = (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse, url: URL) => void;

async function serve(handler: Handler): Promise<{ server: https.Server; kubeconfig: string; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  const server = https.createServer({ cert, key, keepAliveTimeout: 30_000 }, (req, res) => handler(req, res, new URL(req.url!, "https://127.0.0.1")));
  server.on("secureConnection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const kubeconfig = path.join(dir, `kubeconfig-${port}`);
  fs.writeFileSync(
    kubeconfig,
    [
      "apiVersion: v1",
      "kind: Config",
      `clusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", certificate-authority-data: ${cert.toString("base64")}}}]`,
      "users: [{name: u, user: {token: t0ken}}]",
      "contexts: [{name: x, context: {cluster: c, user: u}}]",
      "current-context: x",
    ].join("\n"),
  );
  return {
    server,
    kubeconfig,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const json = (res: import("node:http").ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

async function hammer(client: KubeClient, requests: number, parallel: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < requests) {
        next++;
        await client.request("create sandboxes.agents.x-k8s.io", HttpMethod.POST, "/apis/x", { body: { n: next } });
      }
    }),
  );
}

describe("KubeClient", () => {
  it("reuses keep-alive connections: 200 requests, 16 in flight, a pool of about 16 TLS connections", async () => {
    const api = await serve((req, res) => {
      expect(req.headers.authorization).toBe("Bearer t0ken");
      req.resume();
      req.on("end", () => json(res, 201, { kind: "Sandbox" }));
    });
    const counters = new ApiCounters();
    const client = KubeClient.load(api.kubeconfig, counters);
    await hammer(client, 200, 16);
    await client.dispose();
    await api.close();
    expect(counters.count("create sandboxes.agents.x-k8s.io")).toBe(200);
    expect(counters.snapshot().maxInFlight).toBe(16);
    // undici may open a connection while a finished one is still being returned to the pool, so the
    // pool can overshoot the parallelism a little; without pooling it would be 200 (next test).
    expect(api.connections()).toBeLessThanOrEqual(32);
  });

  it("without the pooled KubeConfig, @kubernetes/client-node 2.0.1 opens one TLS connection per request", async () => {
    const api = await serve((req, res) => {
      req.resume();
      req.on("end", () => json(res, 201, {}));
    });
    const plain = new KubeConfig();
    plain.loadFromFile(api.kubeconfig);
    const client = new KubeClient(plain as PooledKubeConfig, new ApiCounters());
    // A plain KubeConfig has no dispose(); requests only.
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < 40) {
          next++;
          await client.request("create sandboxes.agents.x-k8s.io", HttpMethod.POST, "/apis/x", { body: {} });
        }
      }),
    );
    await api.close();
    expect(api.connections()).toBe(40);
  });

  it("raises KubeApiError with the Status reason and message; retries 429 and counts each attempt", async () => {
    let calls = 0;
    const api = await serve((req, res) => {
      req.resume();
      calls++;
      if (req.url!.startsWith("/busy") && calls === 1) {
        res.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
        res.end(JSON.stringify({ kind: "Status", reason: "TooManyRequests", message: "slow down", code: 429 }));
        return;
      }
      if (req.url!.startsWith("/busy")) return json(res, 200, { ok: true });
      json(res, 409, { kind: "Status", status: "Failure", reason: "AlreadyExists", message: 'sandboxes.agents.x-k8s.io "a-0" already exists', code: 409 });
    });
    const counters = new ApiCounters();
    const client = KubeClient.load(api.kubeconfig, counters);
    await expect(client.request("get localqueues.kueue.x-k8s.io", HttpMethod.GET, "/busy")).resolves.toEqual({ ok: true });
    const error = await client.request("create sandboxes.agents.x-k8s.io", HttpMethod.POST, "/apis/x", { body: {} }).catch((e: unknown) => e);
    await client.dispose();
    await api.close();
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).message).toBe('POST /apis/x: 409 AlreadyExists: sandboxes.agents.x-k8s.io "a-0" already exists');
    expect(counters.snapshot()).toMatchObject({ calls: { "get localqueues.kueue.x-k8s.io": 2, "create sandboxes.agents.x-k8s.io": 1 }, throttled: 1, conflicts: 1 });
  });
});

describe("ListWatch", () => {
  it("re-opens from the last resourceVersion, re-lists on 410 Gone (diffing the cache), follows bookmarks", async () => {
    const seen: string[] = [];
    let lists = 0;
    let watches = 0;
    const pod = (name: string, rv: string): Json => ({ metadata: { name, namespace: "ns", resourceVersion: rv } });
    const api = await serve((req, res, url) => {
      req.resume();
      const isWatch = url.searchParams.get("watch") === "true";
      seen.push(
        `${isWatch ? "watch" : "list"} rv=${url.searchParams.get("resourceVersion") ?? ""} sel=${url.searchParams.get("labelSelector") ?? ""}${isWatch ? ` bookmarks=${url.searchParams.get("allowWatchBookmarks")}` : ""}`,
      );
      if (!isWatch) {
        lists++;
        return lists === 1
          ? json(res, 200, { kind: "PodList", metadata: { resourceVersion: "10" }, items: [pod("a", "1")] })
          : json(res, 200, { kind: "PodList", metadata: { resourceVersion: "20" }, items: [pod("b", "11"), pod("c", "12")] });
      }
      watches++;
      res.writeHead(200, { "content-type": "application/json" });
      if (watches === 1) {
        res.end(`${JSON.stringify({ type: "ADDED", object: pod("b", "11") })}\n`);
      } else if (watches === 2) {
        res.end(`${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version: 11 (15)" } })}\n`);
      } else if (watches === 3) {
        res.write(`${JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "25" } } })}\n`);
        res.end();
      } else {
        res.write(`${JSON.stringify({ type: "MODIFIED", object: pod("c", "26") })}\n`); // held open
      }
    });
    const counters = new ApiCounters();
    const client = KubeClient.load(api.kubeconfig, counters);
    const events: string[] = [];
    const onEvent = (e: CacheEvent): void => {
      events.push(`${e.type} ${String((e.object.metadata as Json).name)}@${String((e.object.metadata as Json).resourceVersion)}`);
    };
    const lw = new ListWatch(
      client,
      { path: "/api/v1/namespaces/ns/pods", listKey: "list pods", watchKey: "watch pods", labelSelector: "cohort-lab.dev/run=r" },
      onEvent,
      (e) => events.push(`FATAL ${e.message}`),
      { backoffMs: 10 },
    );
    await lw.start();
    const deadline = Date.now() + 10_000;
    while (events.length < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    lw.stop();
    await client.dispose();
    await api.close();
    // A re-list reports additions/changes first, then what disappeared.
    expect(events).toEqual(["ADDED a@1", "ADDED b@11", "ADDED c@12", "DELETED a@1", "MODIFIED c@26"]);
    expect(seen).toEqual([
      "list rv= sel=cohort-lab.dev/run=r",
      "watch rv=10 sel=cohort-lab.dev/run=r bookmarks=true",
      "watch rv=11 sel=cohort-lab.dev/run=r bookmarks=true",
      "list rv= sel=cohort-lab.dev/run=r",
      "watch rv=20 sel=cohort-lab.dev/run=r bookmarks=true",
      "watch rv=25 sel=cohort-lab.dev/run=r bookmarks=true",
    ]);
    expect([...lw.objects.keys()].sort()).toEqual(["b", "c"]);
    expect(counters.snapshot().calls).toEqual({ "list pods": 2, "watch pods": 4 });
  });

  it("stops and reports a 403 on watch as fatal (RBAC), without retrying", async () => {
    const api = await serve((req, res, url) => {
      req.resume();
      if (url.searchParams.get("watch") === "true")
        return json(res, 403, { kind: "Status", reason: "Forbidden", message: 'pods is forbidden: User "x" cannot watch resource "pods"', code: 403 });
      json(res, 200, { metadata: { resourceVersion: "1" }, items: [] });
    });
    const client = KubeClient.load(api.kubeconfig, new ApiCounters());
    const fatal = await new Promise<Error>((resolve) => {
      const lw = new ListWatch(client, { path: "/api/v1/namespaces/ns/pods", listKey: "list pods", watchKey: "watch pods" }, () => undefined, resolve, { backoffMs: 10 });
      void lw.start();
    });
    await client.dispose();
    await api.close();
    expect(fatal).toBeInstanceOf(KubeApiError);
    expect((fatal as KubeApiError).status).toBe(403);
  });
});
