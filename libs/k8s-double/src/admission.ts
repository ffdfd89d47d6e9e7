import type { Container, PodSpec } from './pod-types.ts';

/** One rule of a Role, as rbac.authorization.k8s.io/v1 writes it. */
export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface Request {
  verb: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** Whether a namespaced Role's rules allow a request of the core API group (no wildcards granted implicitly). */
export function rulesAllow(rules: readonly PolicyRule[], r: Request): boolean {
  const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
  return rules.some(
    (rule) =>
      (rule.apiGroups ?? []).some((g) => g === '' || g === '*') &&
      (rule.resources ?? []).some(
        (res) => res === resource || res === '*' || (res === `${r.resource}/*` && r.subresource),
      ) &&
      rule.verbs.some((v) => v === r.verb || v === '*') &&
      (!rule.resourceNames?.length || (r.name !== undefined && rule.resourceNames.includes(r.name))),
  );
}

/** The Pod Security Standards level enforced on the namespace (the pod-security.kubernetes.io/enforce label). */
export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';

const BASELINE_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

/**
 * The Pod Security admission check: the violations of `level` in a pod spec, worded as the admission plugin
 * words them (`allowPrivilegeEscalation != false (container "x" must set ...)`). Empty when the pod passes.
 */
export function podSecurityViolations(spec: PodSpec, level: PodSecurityLevel): string[] {
  if (level === 'privileged') return [];
  const containers = [...(spec.initContainers ?? []), ...spec.containers];
  const out: string[] = [];
  const each = (pred: (c: Container) => boolean): string[] => containers.filter(pred).map((c) => c.name);
  const list = (names: string[]) =>
    `${names.length === 1 ? 'container' : 'containers'} ${names.map((n) => `"${n}"`).join(', ')}`;
  const hostNs = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((f) => spec[f] === true);
  if (hostNs.length) out.push(`host namespaces (${hostNs.map((f) => `${f}=true`).join(', ')})`);
  const privileged = each((c) => c.securityContext?.privileged === true);
  if (privileged.length) out.push(`privileged (${list(privileged)} must not set securityContext.privileged=true)`);
  const addsCaps = each((c) =>
    (c.securityContext?.capabilities?.add ?? []).some((cap) => !BASELINE_CAPS.has(cap.replace(/^CAP_/, ''))),
  );
  if (addsCaps.length)
    out.push(`non-default capabilities (${list(addsCaps)} must not include capabilities beyond the default set)`);
  const hostPath = (spec.volumes ?? []).filter((v) => 'hostPath' in v).map((v) => v.name);
  if (hostPath.length) out.push(`hostPath volumes (${hostPath.map((n) => `"${n}"`).join(', ')})`);
  if (level === 'baseline') return out;
  const volumes = (spec.volumes ?? []).filter(
    (v) => !Object.keys(v).some((k) => k !== 'name' && RESTRICTED_VOLUMES.has(k)),
  );
  if (volumes.length) out.push(`restricted volume types (${volumes.map((v) => `"${v.name}"`).join(', ')})`);
  const ape = each((c) => c.securityContext?.allowPrivilegeEscalation !== false);
  if (ape.length)
    out.push(
      `allowPrivilegeEscalation != false (${list(ape)} must set securityContext.allowPrivilegeEscalation=false)`,
    );
  const caps = each(
    (c) =>
      !(c.securityContext?.capabilities?.drop ?? []).includes('ALL') ||
      (c.securityContext?.capabilities?.add ?? []).some((cap) => cap !== 'NET_BIND_SERVICE'),
  );
  if (caps.length)
    out.push(`unrestricted capabilities (${list(caps)} must set securityContext.capabilities.drop=["ALL"])`);
  const podNonRoot = spec.securityContext?.runAsNonRoot === true;
  const nonRoot = each((c) => !(c.securityContext?.runAsNonRoot ?? podNonRoot));
  if (nonRoot.length)
    out.push(`runAsNonRoot != true (pod or ${list(nonRoot)} must set securityContext.runAsNonRoot=true)`);
  const root = each((c) => (c.securityContext?.runAsUser ?? spec.securityContext?.runAsUser) === 0);
  if (root.length) out.push(`runAsUser=0 (${list(root)} must not set runAsUser=0)`);
  const podSeccomp = spec.securityContext?.seccompProfile?.type;
  const seccomp = each(
    (c) => !['RuntimeDefault', 'Localhost'].includes(c.securityContext?.seccompProfile?.type ?? podSeccomp ?? ''),
  );
  if (seccomp.length) {
    out.push(
      `seccompProfile (pod or ${list(seccomp)} must set securityContext.seccompProfile.type to ` +
        '"RuntimeDefault" or "Localhost")',
    );
  }
  return out;
}
