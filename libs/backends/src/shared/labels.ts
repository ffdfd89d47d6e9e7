/**
 * Ownership labels, in one place: every sandbox a backend starts carries them, and sweep finds what to
 * remove by them alone. The keys are valid both as Docker labels and as Kubernetes label names.
 */
export const LABELS = {
  managed: 'org.sandgate.managed',
  execution: 'org.sandgate.execution',
  session: 'org.sandgate.session',
  tenant: 'org.sandgate.tenant',
} as const;

/** Selects everything sandgate owns: a Docker `label` filter entry and a Kubernetes labelSelector alike. */
export const MANAGED_SELECTOR = `${LABELS.managed}=true`;

export interface LabelSource {
  execution_id: string;
  session_id: string;
  tenant: string;
}

export function ownershipLabels(job: LabelSource): Record<string, string> {
  return {
    [LABELS.managed]: 'true',
    [LABELS.execution]: job.execution_id,
    [LABELS.session]: job.session_id,
    [LABELS.tenant]: job.tenant,
  };
}

/** The execution a sandbox belongs to, or undefined when it carries no execution label. */
export function executionOf(labels: Record<string, string> | undefined): string | undefined {
  return labels?.[LABELS.execution];
}

/**
 * Whether sweep should remove a sandbox with these labels: it is sandgate's and no live execution owns it.
 * A managed sandbox without an execution label belongs to nobody, so it goes too.
 */
export function isOrphan(labels: Record<string, string> | undefined, live: ReadonlySet<string>): boolean {
  if (labels?.[LABELS.managed] !== 'true') return false;
  const execution = executionOf(labels);
  return execution === undefined || !live.has(execution);
}
