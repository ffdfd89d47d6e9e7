/** A kubeconfig for the double, in the shape `KubeConfig.loadFromOptions` takes and kubectl reads as YAML. */
export interface KubeConfigObject {
  apiVersion: 'v1';
  kind: 'Config';
  clusters: { name: string; server: string; skipTLSVerify: boolean }[];
  users: { name: string; token: string }[];
  contexts: { name: string; cluster: string; user: string; namespace: string }[];
  currentContext: string;
}

export function kubeconfigFor(server: string, token: string, namespace: string): KubeConfigObject {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    // A plain-http server: @kubernetes/client-node refuses http:// unless skipTLSVerify is set.
    clusters: [{ name: 'k8s-double', server, skipTLSVerify: true }],
    users: [{ name: 'sandgate-worker', token }],
    contexts: [{ name: 'k8s-double', cluster: 'k8s-double', user: 'sandgate-worker', namespace }],
    currentContext: 'k8s-double',
  };
}

/** The same kubeconfig as a YAML file's text (the on-disk field names differ from loadFromOptions'). */
export function kubeconfigYaml(k: KubeConfigObject): string {
  const c = k.clusters[0]!;
  const u = k.users[0]!;
  const x = k.contexts[0]!;
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${c.name}`,
    '  cluster:',
    `    server: ${c.server}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${u.name}`,
    '  user:',
    `    token: ${u.token}`,
    'contexts:',
    `- name: ${x.name}`,
    '  context:',
    `    cluster: ${x.cluster}`,
    `    user: ${x.user}`,
    `    namespace: ${x.namespace}`,
    `current-context: ${k.currentContext}`,
    '',
  ].join('\n');
}
