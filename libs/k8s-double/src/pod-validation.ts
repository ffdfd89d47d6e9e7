import { badRequest } from './status.ts';
import type { K8sObject } from './store.ts';
import { checkMeta, checkSchema, FieldErrors, nameOf } from './validate.ts';
import type { Container, PodSpec } from './pod-types.ts';

/** Volume sources the double can run; any other is refused loudly instead of being ignored. */
const SUPPORTED_VOLUMES = ['emptyDir', 'secret'] as const;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/**
 * Validates a Pod the way the API server's create does (schema, then ValidatePodCreate's rules that a backend
 * can trip over), and fills in the defaults the API server would, so reads show what a cluster shows.
 */
export function admitPodSpec(pod: K8sObject): void {
  checkSchema('Pod', pod);
  const errors = new FieldErrors('Pod', nameOf(pod));
  checkMeta(pod, errors);
  const spec = pod.spec as PodSpec | undefined;
  if (!spec) {
    errors.required('spec');
    return errors.done();
  }
  applyDefaults(spec);
  if (!spec.containers?.length) errors.required('spec.containers');
  const names = new Set<string>();
  const volumes = new Set<string>();
  for (const [i, v] of (spec.volumes ?? []).entries()) {
    const field = `spec.volumes[${i}]`;
    errors.dnsLabel(`${field}.name`, v.name);
    if (volumes.has(v.name)) errors.duplicate(`${field}.name`, v.name);
    volumes.add(v.name);
    const sources = Object.keys(v).filter((k) => k !== 'name');
    if (sources.length !== 1) errors.forbidden(field, 'may not specify more than 1 volume type');
    if (!sources.every((s) => (SUPPORTED_VOLUMES as readonly string[]).includes(s))) {
      throw badRequest(
        `k8s-double: volume "${v.name}" uses ${sources.join(', ')}; ` +
          `the double runs ${SUPPORTED_VOLUMES.join(' and ')} only`,
      );
    }
    if (v.emptyDir?.sizeLimit !== undefined) errors.quantity(`${field}.emptyDir.sizeLimit`, v.emptyDir.sizeLimit);
    const mode = v.secret?.defaultMode;
    if (mode !== undefined && (mode < 0 || mode > 0o777)) {
      errors.invalid(
        `${field}.secret.defaultMode`,
        mode,
        'must be a number between 0 and 0777 (octal), both inclusive',
      );
    }
  }
  const all: [string, Container][] = [
    ...(spec.initContainers ?? []).map((c, i): [string, Container] => [`spec.initContainers[${i}]`, c]),
    ...(spec.containers ?? []).map((c, i): [string, Container] => [`spec.containers[${i}]`, c]),
  ];
  for (const [field, c] of all) {
    errors.dnsLabel(`${field}.name`, c.name);
    if (names.has(c.name)) errors.duplicate(`${field}.name`, c.name);
    names.add(c.name);
    checkContainer(field, c, volumes, errors);
  }
  if (spec.activeDeadlineSeconds !== undefined && spec.activeDeadlineSeconds < 1) {
    errors.invalid(
      'spec.activeDeadlineSeconds',
      spec.activeDeadlineSeconds,
      'must be between 1 and 2147483647, inclusive',
    );
  }
  if (spec.runtimeClassName !== undefined) errors.dnsSubdomain('spec.runtimeClassName', spec.runtimeClassName);
  errors.done();
}

function checkContainer(field: string, c: Container, volumes: Set<string>, errors: FieldErrors): void {
  if (!c.image) errors.required(`${field}.image`);
  const paths = new Set<string>();
  for (const [j, m] of (c.volumeMounts ?? []).entries()) {
    if (!volumes.has(m.name)) errors.notFound(`${field}.volumeMounts[${j}].name`, m.name);
    if (paths.has(m.mountPath)) errors.invalid(`${field}.volumeMounts[${j}].mountPath`, m.mountPath, 'must be unique');
    paths.add(m.mountPath);
  }
  for (const [j, e] of (c.env ?? []).entries()) {
    if (!ENV_NAME.test(e.name)) {
      errors.invalid(
        `${field}.env[${j}].name`,
        e.name,
        'a valid environment variable name must consist of alphabetic characters, ' +
          "digits, '_', '-', or '.', and must not start with a digit",
      );
    }
  }
  const limits = c.resources?.limits ?? {};
  const requests = c.resources?.requests ?? {};
  for (const [res, value] of Object.entries(requests)) {
    const req = errors.quantity(`${field}.resources.requests[${res}]`, value);
    const lim = limits[res];
    if (lim !== undefined && req > errors.quantity(`${field}.resources.limits[${res}]`, lim)) {
      errors.invalid(`${field}.resources.requests`, value, `must be less than or equal to ${res} limit of ${lim}`);
    }
  }
  for (const [res, value] of Object.entries(limits)) errors.quantity(`${field}.resources.limits[${res}]`, value);
}

/** The API server's defaults (pkg/apis/core/v1/defaults.go) for the fields a reader of the Pod may look at. */
function applyDefaults(spec: PodSpec): void {
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.serviceAccountName ??= 'default';
  spec.serviceAccount ??= spec.serviceAccountName;
  spec.securityContext ??= {};
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    c.terminationMessagePath ??= '/dev/termination-log';
    c.terminationMessagePolicy ??= 'File';
    c.imagePullPolicy ??= c.image?.endsWith(':latest') || !/:[^/]+$/.test(c.image ?? '') ? 'Always' : 'IfNotPresent';
    c.resources ??= {};
    // A limit without a request requests the limit.
    if (c.resources.limits) c.resources.requests = { ...c.resources.limits, ...(c.resources.requests ?? {}) };
  }
  for (const v of spec.volumes ?? []) if (v.secret) v.secret.defaultMode ??= 0o644;
}
