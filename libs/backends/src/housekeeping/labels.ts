import type { LiveSet } from '../backend.ts';

/**
 * Ownership labels, in one place: every sandbox a backend starts carries them, and sweep finds what to
 * remove by them alone. The keys are valid both as Docker labels and as Kubernetes label names.
 */
export const LABELS = {
  managed: 'org.sandgate.managed',
  /** Which sandgate deployment owns it: sweep never touches another deployment's sandboxes. */
  deployment: 'org.sandgate.deployment',
  /** What it is for: a SandboxRole. */
  kind: 'org.sandgate.kind',
  execution: 'org.sandgate.execution',
  session: 'org.sandgate.session',
  tenant: 'org.sandgate.tenant',
  /** Warm-pool sandboxes: the worker instance whose pool it belongs to. */
  instance: 'org.sandgate.instance',
  /** Session sandboxes: the session generation it was made for (a restart bumps it). */
  generation: 'org.sandgate.generation',
  /** Session sandboxes: made in place of an earlier one, so its first interpreter is a restart. */
  replaces: 'org.sandgate.replaces',
  /** Session sandboxes: `egress` when it reaches the network through the egress proxy; absent: no network. */
  network: 'org.sandgate.network',
  /** Sandboxes of a template (pool, session, one-shot): its name; absent: the runtime image. */
  template: 'org.sandgate.template',
} as const;

/**
 * What a sandbox is for (its `org.sandgate.kind` label): `execution`, one run, removed after it; `pool`, a warm
 * sandbox waiting for a run; `session`, a session's long-lived sandbox. Not to be confused with where a run happens
 * (ExecutionJob's `sandbox`: oneshot, session, stateful).
 */
export type SandboxRole = 'execution' | 'pool' | 'session';

/** The deployment a backend belongs to when none is configured. */
export const DEFAULT_DEPLOYMENT = 'sandgate';

/** Selects everything sandgate owns: a Docker `label` filter entry and a Kubernetes labelSelector alike. */
export const MANAGED_SELECTOR = `${LABELS.managed}=true`;

export interface LabelSource {
  execution_id: string;
  session_id: string;
  tenant: string;
  template?: string | undefined;
}

/** What every sandbox carries, whatever its role: sweep finds and scopes its work by these alone. */
function managed(deployment: string, role: SandboxRole): Record<string, string> {
  return { [LABELS.managed]: 'true', [LABELS.deployment]: deployment, [LABELS.kind]: role };
}

/** Labels of a sandbox that runs one execution. */
export function ownershipLabels(job: LabelSource, deployment: string = DEFAULT_DEPLOYMENT): Record<string, string> {
  return {
    ...managed(deployment, 'execution'),
    [LABELS.execution]: job.execution_id,
    [LABELS.session]: job.session_id,
    [LABELS.tenant]: job.tenant,
    ...(job.template === undefined ? {} : { [LABELS.template]: job.template }),
  };
}

/** Labels of a warm-pool sandbox of one worker instance (of a template's pool: with its name). */
export function poolLabels(deployment: string, instanceId: string, template?: string): Record<string, string> {
  return {
    ...managed(deployment, 'pool'),
    [LABELS.instance]: instanceId,
    ...(template === undefined ? {} : { [LABELS.template]: template }),
  };
}

export interface SessionLabelSource {
  session_id: string;
  tenant: string;
  generation: number;
  network?: 'egress' | undefined;
  template?: string | undefined;
}

/** Labels of a session's long-lived sandbox; `replaces` when it takes the place of an earlier one. */
export function sessionLabels(job: SessionLabelSource, deployment: string, replaces: boolean): Record<string, string> {
  return {
    ...managed(deployment, 'session'),
    [LABELS.session]: job.session_id,
    [LABELS.tenant]: job.tenant,
    [LABELS.generation]: String(job.generation),
    ...(replaces ? { [LABELS.replaces]: 'true' } : {}),
    ...(job.network ? { [LABELS.network]: job.network } : {}),
    ...(job.template === undefined ? {} : { [LABELS.template]: job.template }),
  };
}

/** The execution a sandbox belongs to, or undefined when it carries no execution label. */
export function executionOf(labels: Record<string, string> | undefined): string | undefined {
  return labels?.[LABELS.execution];
}

/** The deployment of a managed sandbox; ones made before deployments were labelled belong to the default one. */
export function deploymentOf(labels: Record<string, string> | undefined): string {
  return labels?.[LABELS.deployment] ?? DEFAULT_DEPLOYMENT;
}

/** A sandbox's role; ones made before roles were labelled ran one execution each. */
export function roleOf(labels: Record<string, string> | undefined): SandboxRole {
  const kind = labels?.[LABELS.kind];
  return kind === 'pool' || kind === 'session' ? kind : 'execution';
}

/** What a sweep reports for a sandbox it removed: the execution, session or worker instance it belonged to. */
export function ownerOf(labels: Record<string, string> | undefined): string | undefined {
  switch (roleOf(labels)) {
    case 'pool':
      return labels?.[LABELS.instance];
    case 'session':
      return labels?.[LABELS.session];
    case 'execution':
      return executionOf(labels);
  }
}

/**
 * Whether sweep should remove a sandbox with these labels: it is sandgate's, of this deployment, and nothing in
 * `live` owns it: its execution, its session or its pool's worker. A managed sandbox that names no owner goes too.
 */
export function isOrphan(
  labels: Record<string, string> | undefined,
  live: LiveSet,
  deployment: string = DEFAULT_DEPLOYMENT,
): boolean {
  if (labels?.[LABELS.managed] !== 'true' || deploymentOf(labels) !== deployment) return false;
  const owner = ownerOf(labels);
  if (owner === undefined) return true;
  switch (roleOf(labels)) {
    case 'pool':
      return !live.workers.has(owner);
    case 'session':
      return !live.sessions.has(owner);
    case 'execution':
      return !live.executions.has(owner);
  }
}
