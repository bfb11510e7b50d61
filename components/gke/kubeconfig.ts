/**
 * The kubeconfig of a GKE cluster (pure): the cluster endpoint and CA, and an exec credential that runs
 * `gke-gcloud-auth-plugin` (no static token or client certificate is stored anywhere; the plugin gets a
 * short-lived token from the user's gcloud credentials at each use).
 *
 * @see https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin
 */
import * as YAML from "yaml";

/** The context (and cluster and user) name, as `gcloud container clusters get-credentials` writes it. */
export function gkeContextName(project: string, location: string, cluster: string): string {
  return `gke_${project}_${location}_${cluster}`;
}

/** Renders the kubeconfig. `caCertificate` is the base64 PEM of `masterAuth.clusterCaCertificate`. */
export function renderGkeKubeconfig(o: { readonly context: string; readonly endpoint: string; readonly caCertificate: string }): string {
  return YAML.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: o.context, cluster: { server: `https://${o.endpoint}`, "certificate-authority-data": o.caCertificate } }],
      contexts: [{ name: o.context, context: { cluster: o.context, user: o.context } }],
      "current-context": o.context,
      users: [
        {
          name: o.context,
          user: {
            exec: {
              apiVersion: "client.authentication.k8s.io/v1beta1",
              command: "gke-gcloud-auth-plugin",
              provideClusterInfo: true,
              interactiveMode: "Never",
              installHint:
                "Install gke-gcloud-auth-plugin: `gcloud components install gke-gcloud-auth-plugin` (https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin)",
            },
          },
        },
      ],
    },
    { lineWidth: 0 },
  );
}
