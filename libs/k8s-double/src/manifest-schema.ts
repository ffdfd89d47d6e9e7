import { Pod } from 'kubernetes-models/v1/Pod';
import { ApiError } from './status.ts';

/** The typed model of a kind, with the schema check kubernetes-models generated from the Kubernetes OpenAPI. */
type ModelClass = new (data: object) => { validate(): void };

/** `/spec/containers/0/name` → `spec.containers[0].name`, the API server's field paths. */
function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`))
    .join('');
}

/** `apps/v1` + `Deployment` → the kubernetes-models module path (`apps/v1/Deployment`; core kinds under `v1/`). */
export function modelPath(apiVersion: string, kind: string): string {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/**
 * Checks any manifest against the real schema of its apiVersion and kind; throws naming the object and every
 * violation. An apiVersion/kind the schemas do not know is itself an error (a typo a cluster would refuse).
 */
export async function validateManifest(obj: {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
}): Promise<void> {
  const id = `${obj.kind ?? '?'} ${obj.metadata?.name ?? '?'}`;
  if (!obj.apiVersion || !obj.kind) throw new Error(`${id}: apiVersion and kind are required`);
  // Pods, the kind checked most, from a module loaded once; every other kind's model loaded by its name.
  let Model: ModelClass = Pod;
  if (obj.apiVersion !== 'v1' || obj.kind !== 'Pod') {
    try {
      const mod = (await import(modelPath(obj.apiVersion, obj.kind))) as Record<string, ModelClass>;
      Model = mod[obj.kind]!;
    } catch (err) {
      throw new Error(`${id}: no schema for ${obj.apiVersion} ${obj.kind}`, { cause: err });
    }
  }
  try {
    new Model(obj).validate();
  } catch (err) {
    const errors = (err as { errors?: { instancePath: string; message?: string }[] }).errors;
    if (!errors) throw err;
    throw new Error(
      `${id} is invalid: ${errors.map((e) => `${fieldPath(e.instancePath) || '(root)'} ${e.message}`).join('; ')}`,
      { cause: err },
    );
  }
}

/** A metav1.LabelSelector (matchLabels + matchExpressions) against a set of labels, as a NetworkPolicy applies it. */
export function labelSelectorMatches(
  selector: {
    matchLabels?: Record<string, string>;
    matchExpressions?: { key: string; operator: string; values?: string[] }[];
  },
  labels: Record<string, string>,
): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    byLabels &&
    (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      switch (operator) {
        case 'In':
          return key in labels && values.includes(labels[key]!);
        case 'NotIn':
          return !(key in labels) || !values.includes(labels[key]!);
        case 'Exists':
          return key in labels;
        case 'DoesNotExist':
          return !(key in labels);
        default:
          throw new ApiError(400, 'BadRequest', `"${operator}" is not a valid label selector operator`);
      }
    })
  );
}
