/**
 * The Temporal dev server of the cluster profiles (pure; no Pulumi, no I/O): one Deployment running the
 * Temporal CLI image's `temporal server start-dev`, and a NodePort Service for its gRPC frontend, which the
 * kind config maps to a loopback port on the host (components/kind/kindConfig.ts).
 *
 * Settings follow the public simulator this project descends from (docs/local.md "Pins and why these versions"):
 * `--ip 0.0.0.0 --headless --db-filename /var/lib/temporal/temporal.db` on an emptyDir (state is lost when the
 * pod restarts: a dev server), uid/gid 1000, no service-account token, requests 100m CPU / 128Mi, a TCP
 * readiness probe on the frontend port.
 *
 * @see https://docs.temporal.io/cli/server#start-dev
 */
import type { KubernetesObject } from "./cache.js";

/** Namespace of the profile's own system workloads (Temporal). */
export const SYSTEM_NAMESPACE = "cohort-lab-system";
/** Name of the Deployment and Service. */
export const TEMPORAL_NAME = "temporal";
/** Temporal frontend gRPC port (the CLI default). */
export const TEMPORAL_GRPC_PORT = 7233;
/** Requests of the Temporal pod (also counted by the quota as a reserved pod). */
export const TEMPORAL_REQUESTS = { cpu: "100m", memory: "128Mi" } as const;

/** Inputs of {@link renderTemporal}. */
export interface TemporalInput {
  /** Image pinned by digest. */
  readonly image: string;
  /** NodePort of the frontend Service (30000-32767). */
  readonly nodePort: number;
  /** @default {@link SYSTEM_NAMESPACE} */
  readonly namespace?: string;
}

/** Renders [Deployment, Service] (the namespace is created by the caller). */
export function renderTemporal(input: TemporalInput): KubernetesObject[] {
  const namespace = input.namespace ?? SYSTEM_NAMESPACE;
  const labels = { "app.kubernetes.io/name": TEMPORAL_NAME, "app.kubernetes.io/part-of": "cohort-lab" };
  const deployment: KubernetesObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: TEMPORAL_NAME, namespace, labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: { "app.kubernetes.io/name": TEMPORAL_NAME } },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: TEMPORAL_NAME,
              image: input.image,
              imagePullPolicy: "IfNotPresent",
              args: ["server", "start-dev", "--ip", "0.0.0.0", "--port", String(TEMPORAL_GRPC_PORT), "--headless", "--db-filename", "/var/lib/temporal/temporal.db"],
              ports: [{ name: "grpc", containerPort: TEMPORAL_GRPC_PORT, protocol: "TCP" }],
              readinessProbe: { tcpSocket: { port: "grpc" }, periodSeconds: 2, failureThreshold: 30 },
              resources: { requests: { ...TEMPORAL_REQUESTS }, limits: { memory: "512Mi" } },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
              volumeMounts: [{ name: "state", mountPath: "/var/lib/temporal" }],
            },
          ],
          volumes: [{ name: "state", emptyDir: {} }],
        },
      },
    },
  };
  const service: KubernetesObject = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: TEMPORAL_NAME, namespace, labels },
    spec: {
      type: "NodePort",
      selector: { "app.kubernetes.io/name": TEMPORAL_NAME },
      ports: [{ name: "grpc", port: TEMPORAL_GRPC_PORT, targetPort: "grpc", nodePort: input.nodePort, protocol: "TCP" }],
    },
  };
  return [deployment, service];
}
