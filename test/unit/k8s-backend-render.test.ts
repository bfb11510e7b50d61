import { describe, expect, it } from "vitest";
import type { MemberPlan } from "../../runtime/core/backend";
import { SpecError } from "../../runtime/core/errors";
import { memberIdentities, planMembers } from "../../runtime/core/plan";
import { loadRunSpec, type CompiledRunSpec } from "../../runtime/core/spec";
import { resolveKubernetesConfig } from "../../runtime/backends/kubernetes/index";
import {
  cohortNeeds,
  podSetNames,
  podShapes,
  quantityValue,
  renderSandbox,
  renderSecret,
  renderWorkload,
  runLabelValue,
  validateRoster,
  type RenderContext,
} from "../../runtime/backends/kubernetes/render";

const IMG = `registry.example/agent@sha256:${"a".repeat(64)}`;
const RUN_ID = "society-20260101T120000Z-a1b2c3";

const SPEC = `
apiVersion: cohort-lab/v1
kind: Cohort
name: society
stopGracePeriod: 7s
roles:
  - name: router
    app:
      image: ${IMG}
      command: ["sh", "-c", "exec serve --port $(COHORT_PORT)"]
    readiness: { http: { path: /healthz } }
    resources: { cpu: 100m, memory: 128Mi }
  - name: agent
    replicas: 2
    needs: [router]
    app:
      image: ${IMG}
      command: ["agent", "--router=$(COHORT_NEEDS)"]
      env: { GREETING: "hi $(COHORT_MEMBER)", AUTH_HEADER: "Bearer $(TOKEN)" }
      secretEnv: [TOKEN]
    readiness: { exec: { command: ["check", "$(COHORT_MEMBER)"] } }
    resources: { cpu: "0.1", memory: 128Mi }
`;

function setup(specText = SPEC, overrides: Record<string, unknown> = {}): { spec: CompiledRunSpec; ctx: RenderContext; plans: MemberPlan[] } {
  const spec = loadRunSpec(specText);
  const { ctx } = resolveKubernetesConfig({ spec, runId: RUN_ID, namespace: "run-1", queue: "cohort", events: () => undefined, ...overrides });
  const endpoints = new Map(
    memberIdentities(spec)
      .filter((m) => m.wantsPort)
      .map((m) => [m.id, { host: `${m.id}.run-1.svc`, port: 8080 }]),
  );
  const secrets = new Map(
    memberIdentities(spec).map((m) => [m.id, spec.roles.find((r) => r.name === m.role)!.secretEnv.reduce((acc, name) => ({ ...acc, [name]: `tok-${m.id}` }), {})]),
  );
  const plans = planMembers({ spec, runId: RUN_ID, runDir: "/tmp/run", endpoints, secrets });
  return { spec, ctx, plans };
}

describe("runLabelValue", () => {
  it("lower-cases the run id (the T and Z of the timestamp are upper case)", () => {
    expect(runLabelValue(RUN_ID)).toBe("society-20260101t120000z-a1b2c3");
  });
  it("keeps long ids within 63 characters with a hash suffix", () => {
    const long = `${"x".repeat(70)}-20260101T120000Z-a1b2c3`;
    const label = runLabelValue(long);
    expect(label).toMatch(/^x{54}-[0-9a-f]{8}$/);
    expect(label.length).toBe(63);
  });
});

describe("quantityValue", () => {
  it.each([
    ["100m", 0.1],
    ["0.1", 0.1],
    ["1", 1],
    ["128Mi", 128 * 2 ** 20],
    ["1G", 1e9],
    ["1e3", 1000],
  ])("%s -> %d", (q, v) => {
    expect(quantityValue(q)).toBeCloseTo(v, 12);
  });
  it("is NaN for text that is not a quantity", () => {
    expect(quantityValue("lots")).toBeNaN();
  });
});

describe("renderSandbox", () => {
  it("renders the router: Kueue pod-group metadata, our gate, probe, Service (it is needed)", () => {
    const { ctx, plans } = setup();
    expect(renderSandbox(plans[0]!, ctx)).toEqual({
      apiVersion: "agents.x-k8s.io/v1beta1",
      kind: "Sandbox",
      metadata: {
        name: "router-0",
        namespace: "run-1",
        labels: {
          "cohort-lab.dev/run": "society-20260101t120000z-a1b2c3",
          "cohort-lab.dev/role": "router",
          "cohort-lab.dev/member": "router-0",
          "app.kubernetes.io/managed-by": "cohort-lab",
        },
      },
      spec: {
        service: true,
        podTemplate: {
          metadata: {
            labels: {
              "cohort-lab.dev/run": "society-20260101t120000z-a1b2c3",
              "cohort-lab.dev/role": "router",
              "cohort-lab.dev/member": "router-0",
              "kueue.x-k8s.io/queue-name": "cohort",
              "kueue.x-k8s.io/pod-group-name": "society-20260101t120000z-a1b2c3",
            },
            annotations: { "kueue.x-k8s.io/pod-group-total-count": "3", "kueue.x-k8s.io/pod-group-serving": "true" },
          },
          spec: {
            schedulingGates: [{ name: "cohort-lab.dev/start" }],
            restartPolicy: "Never",
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            terminationGracePeriodSeconds: 7,
            securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
            containers: [
              {
                name: "member",
                image: IMG,
                command: ["sh", "-c", "exec serve --port $(COHORT_PORT)"],
                env: [
                  { name: "COHORT_RUN_ID", value: RUN_ID },
                  { name: "COHORT_ROLE", value: "router" },
                  { name: "COHORT_INDEX", value: "0" },
                  { name: "COHORT_MEMBER", value: "router-0" },
                  { name: "COHORT_PORT", value: "8080" },
                  { name: "COHORT_NEEDS", value: "{}" },
                ],
                ports: [{ name: "cohort", containerPort: 8080, protocol: "TCP" }],
                resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "100m", memory: "128Mi" } },
                readinessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 1, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
                terminationMessagePolicy: "FallbackToLogsOnError",
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
              },
            ],
          },
        },
      },
    });
  });

  it("renders an agent: secrets by secretKeyRef (never the value), env as written, exec probe expanded", () => {
    const { ctx, plans } = setup();
    const sandbox = renderSandbox(plans[2]!, ctx) as any;
    expect(sandbox.metadata.name).toBe("agent-1");
    expect(sandbox.spec.service).toBeUndefined();
    const container = sandbox.spec.podTemplate.spec.containers[0];
    expect(container.command).toEqual(["agent", "--router=$(COHORT_NEEDS)"]);
    expect(container.env).toEqual([
      { name: "COHORT_RUN_ID", value: RUN_ID },
      { name: "COHORT_ROLE", value: "agent" },
      { name: "COHORT_INDEX", value: "1" },
      { name: "COHORT_MEMBER", value: "agent-1" },
      { name: "COHORT_PORT", value: "8080" },
      { name: "COHORT_NEEDS", value: '{"router":["router-0.run-1.svc:8080"]}' },
      { name: "TOKEN", valueFrom: { secretKeyRef: { name: "society-20260101t120000z-a1b2c3-env", key: "agent-1.TOKEN" } } },
      { name: "GREETING", value: "hi $(COHORT_MEMBER)" },
      { name: "AUTH_HEADER", value: "Bearer $(TOKEN)" },
    ]);
    expect(container.readinessProbe).toEqual({ exec: { command: ["check", "agent-1"] }, periodSeconds: 1, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 });
    expect(JSON.stringify(sandbox)).not.toContain("tok-agent-1");
  });

  it("COHORT_NEEDS equals what the core plans with the backend's endpoints", () => {
    const { ctx, plans, spec } = setup();
    const agentRole = spec.roles.find((r) => r.name === "agent")!;
    expect(cohortNeeds(agentRole, ctx)).toBe(plans[1]!.env.COHORT_NEEDS);
  });

  it("renders no Kueue metadata without a LocalQueue", () => {
    const { ctx, plans } = setup(SPEC, { queue: undefined });
    const pod = (renderSandbox(plans[0]!, ctx) as any).spec.podTemplate;
    expect(Object.keys(pod.metadata.labels).filter((k) => k.startsWith("kueue.x-k8s.io/"))).toEqual([]);
    expect(pod.metadata.annotations).toBeUndefined();
    expect(pod.spec.schedulingGates).toEqual([{ name: "cohort-lab.dev/start" }]);
  });

  it("renders nodeSelector and tolerations only when given (with Kueue they come from the ResourceFlavor)", () => {
    const toleration = { key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" };
    const given = setup(SPEC, { queue: undefined, nodeSelector: { "cohort-lab.dev/pool": "agents" }, tolerations: [toleration] });
    const spec = (renderSandbox(given.plans[0]!, given.ctx) as any).spec.podTemplate.spec;
    expect(spec.nodeSelector).toEqual({ "cohort-lab.dev/pool": "agents" });
    expect(spec.tolerations).toEqual([toleration]);
    const { ctx, plans } = setup();
    const plain = (renderSandbox(plans[0]!, ctx) as any).spec.podTemplate.spec;
    expect(plain.nodeSelector).toBeUndefined();
    expect(plain.tolerations).toBeUndefined();
  });

  it("adds per-member pod metadata (e.g. a kwok failure stage) without letting it override ours", () => {
    const { ctx, plans } = setup(SPEC, { memberPodMetadata: { "agent-0": { labels: { "fail.example/now": "true" }, annotations: { "fail.example/delay": "1s" } } } });
    const meta = (renderSandbox(plans[1]!, ctx) as any).spec.podTemplate.metadata;
    expect(meta.labels["fail.example/now"]).toBe("true");
    expect(meta.annotations["fail.example/delay"]).toBe("1s");
    expect((renderSandbox(plans[2]!, ctx) as any).spec.podTemplate.metadata.labels["fail.example/now"]).toBeUndefined();
  });
});

describe("renderSecret", () => {
  it("holds every member's generated tokens in one Secret, keyed <member>.<NAME>", () => {
    const { ctx, plans } = setup();
    expect(renderSecret(plans, ctx)).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      type: "Opaque",
      metadata: {
        name: "society-20260101t120000z-a1b2c3-env",
        namespace: "run-1",
        labels: { "cohort-lab.dev/run": "society-20260101t120000z-a1b2c3", "app.kubernetes.io/managed-by": "cohort-lab" },
      },
      stringData: { "agent-0.TOKEN": "tok-agent-0", "agent-1.TOKEN": "tok-agent-1" },
    });
  });
  it("is undefined when no role has secretEnv", () => {
    const { ctx, plans } = setup(SPEC.replace("      secretEnv: [TOKEN]\n", "").replace(', AUTH_HEADER: "Bearer $(TOKEN)"', ""));
    expect(renderSecret(plans, ctx)).toBeUndefined();
  });
});

function issues(fn: () => void): string[] {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(SpecError);
    return (error as SpecError).issues.map((i) => `${i.path}: ${i.reason}`);
  }
  throw new Error("expected a SpecError");
}

describe("validateRoster", () => {
  it("accepts the example", () => {
    const { ctx, plans } = setup();
    expect(() => validateRoster(plans, ctx)).not.toThrow();
  });

  it("refuses a missing image, log readiness and app.files, naming the role", () => {
    const text = `
apiVersion: cohort-lab/v1
kind: Cohort
name: bad
roles:
  - name: a
    app: { command: [x] }
  - name: b
    app: { command: [x], image: "${IMG}", files: { "conf.json": "{}" } }
    readiness: { log: { pattern: ready } }
`;
    const { ctx, plans } = setup(text);
    expect(issues(() => validateRoster(plans, ctx))).toEqual([
      'roles[0].app.image: role "a": the kubernetes backend needs an image pinned by digest (name@sha256:<64 hex>); none is set',
      'roles[1].readiness.log: role "b": log readiness is not supported by the kubernetes backend (the kubelet probes pods; it does not match output lines); use an http, tcp or exec probe',
      'roles[1].app.files: role "b": app.files is not supported by the kubernetes backend (a pod has no member directory to write into); bake the files into the image',
    ]);
  });

  it("refuses a needed role whose name cannot be a Service name", () => {
    const text = `
apiVersion: cohort-lab/v1
kind: Cohort
name: svc
roles:
  - name: 9db
    app: { command: [x], image: "${IMG}" }
  - name: web
    needs: [9db]
    app: { command: [x], image: "${IMG}" }
`;
    const { ctx, plans } = setup(text);
    expect(issues(() => validateRoster(plans, ctx))).toEqual([
      'roles[0].name: role "9db" is needed by other roles, so its members get a Service, whose name must start with a letter (DNS-1035)',
    ]);
  });

  it("counts pod shapes as Kueue does (100m and 0.1 are one shape) and refuses more than 8", () => {
    const { ctx, spec } = setup();
    expect(podShapes(spec.roles, ctx)).toEqual([["router", "agent"]]);
    const roles = Array.from({ length: 9 }, (_, i) => `  - name: r${i}\n    app: { command: [x], image: "${IMG}" }\n    resources: { cpu: ${i + 1}00m }\n`).join("");
    const text = `apiVersion: cohort-lab/v1\nkind: Cohort\nname: wide\nroles:\n${roles}`;
    const wide = setup(text);
    expect(issues(() => validateRoster(wide.plans, wide.ctx))).toEqual([
      "roles: the roster has 9 distinct pod shapes (resource requests + ports): r0, r1, r2, r3, r4, r5, r6, r7, r8; Kueue admits a pod group with at most 8 (kueue pkg/controller/jobs/pod/pod_controller.go), so give roles identical resources to share a pod set",
    ]);
    // Without Kueue there is no pod-set limit.
    const noKueue = setup(text, { queue: undefined });
    expect(() => validateRoster(noKueue.plans, noKueue.ctx)).not.toThrow();
  });

  it("refuses extra pod metadata under reserved prefixes", () => {
    const { ctx, plans } = setup(SPEC, { podMetadata: { labels: { "kueue.x-k8s.io/queue-name": "other" } } });
    expect(issues(() => validateRoster(plans, ctx))).toEqual([
      'kubernetes.podMetadata.labels["kueue.x-k8s.io/queue-name"]: keys under cohort-lab.dev/, kueue.x-k8s.io/, agents.x-k8s.io/ are set by cohort-lab, Kueue or Agent Sandbox',
    ]);
  });
});

describe("resolveKubernetesConfig", () => {
  it("names the bad field", () => {
    const spec = loadRunSpec(SPEC);
    expect(issues(() => resolveKubernetesConfig({ spec, runId: RUN_ID, namespace: "Run_1", events: () => undefined }))).toEqual([
      "kubernetes.namespace: must be a DNS-1123 label (the run namespace)",
    ]);
  });
  it("applies defaults", () => {
    const spec = loadRunSpec(SPEC);
    const { settings, ctx } = resolveKubernetesConfig({ spec, runId: RUN_ID, namespace: "run-1", events: () => undefined });
    expect(settings).toEqual({
      namespace: "run-1",
      localQueue: undefined,
      podGroup: "society-20260101t120000z-a1b2c3",
      admissionTimeoutMs: 3_599_000,
      createConcurrency: 32,
      unschedulableGraceMs: 2000,
      reconcileErrorGraceMs: 5000,
      transientErrorGraceMs: 60_000,
      controllerStallMs: 30_000,
      closeTimeoutMs: 60_000,
      stopExtraMs: 10_000,
      watchTimeoutSeconds: 300,
      admission: "podGroup",
      flavors: {},
    });
    expect(ctx.admission).toBe("podGroup");
    expect(ctx.containerPort).toBe(8080);
    expect(ctx.terminationGraceSeconds).toBe(7);
  });
});

describe('admission: "workload"', () => {
  const placement = { nodeSelector: { "cohort-lab.dev/pool": "agents" }, tolerations: [{ key: "cohort-lab.dev/agents", operator: "Equal", value: "true", effect: "NoSchedule" }] };

  it("renders the Sandbox without Kueue metadata or any scheduling gate, with the admitted placement", () => {
    const { ctx, plans } = setup(SPEC, { admission: "workload" });
    const sandbox = renderSandbox(plans[1]!, ctx, placement) as any;
    const template = sandbox.spec.podTemplate;
    expect(Object.keys(template.metadata.labels).filter((k: string) => k.startsWith("kueue.x-k8s.io/"))).toEqual([]);
    expect(template.metadata.annotations).toBeUndefined();
    expect(template.spec.schedulingGates).toBeUndefined();
    expect(template.spec.nodeSelector).toEqual(placement.nodeSelector);
    expect(template.spec.tolerations).toEqual(placement.tolerations);
    // podGroup (the default) keeps the pod-group metadata and our gate.
    const { ctx: pg, plans: pgPlans } = setup();
    const gated = renderSandbox(pgPlans[1]!, pg) as any;
    expect(gated.spec.podTemplate.metadata.labels["kueue.x-k8s.io/pod-group-name"]).toBe(pg.podGroup);
    expect(gated.spec.podTemplate.spec.schedulingGates).toEqual([{ name: "cohort-lab.dev/start" }]);
  });

  it("renders ONE Workload in the LocalQueue, one pod set per role with its replicas and requests, no owner", () => {
    const { ctx } = setup(SPEC, { admission: "workload" });
    const wl = renderWorkload(ctx) as any;
    expect(wl.apiVersion).toBe("kueue.x-k8s.io/v1beta2");
    expect(wl.kind).toBe("Workload");
    expect(wl.metadata.name).toBe(ctx.podGroup);
    expect(wl.metadata.ownerReferences).toBeUndefined();
    expect(wl.spec.queueName).toBe("cohort");
    expect(wl.spec.podSets.map((ps: any) => [ps.name, ps.count, ps.template.spec.containers[0].resources.requests])).toEqual([
      ["router", 1, { cpu: "100m", memory: "128Mi" }],
      ["agent", 2, { cpu: "0.1", memory: "128Mi" }],
    ]);
  });

  it("names pod sets by pod shape when the roster has more than 8 roles (the Workload's limit)", () => {
    const roles = Array.from({ length: 9 }, (_, i) => `  - name: r${i}\n    app: { image: ${IMG}, command: [x] }\n    resources: { cpu: 10m, memory: 16Mi }\n`).join("");
    const { ctx } = setup(`apiVersion: cohort-lab/v1\nkind: Cohort\nname: many\nroles:\n${roles}`, { admission: "workload" });
    expect(new Set(podSetNames(ctx).values())).toEqual(new Set(["ps-0"]));
    expect((renderWorkload(ctx) as any).spec.podSets.map((ps: any) => [ps.name, ps.count])).toEqual([["ps-0", 9]]);
  });

  it("refuses an unknown admission value, naming the field", () => {
    expect(() => setup(SPEC, { admission: "pods" })).toThrow(/kubernetes\.admission/);
  });
});
