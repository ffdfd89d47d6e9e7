import { badRequest } from './status.ts';

/** One term of a label selector, as apimachinery's labels.Parse reads it. */
type Requirement = { key: string; op: 'exists' | 'notexists' } | { key: string; op: 'in' | 'notin'; values: string[] };

export type Matcher = (labels: Record<string, string> | undefined) => boolean;

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Splits on commas outside parentheses: `a in (x,y),b` is two terms. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  out.push(selector.slice(start));
  return out.map((t) => t.trim());
}

function requirement(term: string): Requirement {
  const fail = (why: string) => badRequest(`unable to parse requirement: ${why}`);
  let m: RegExpExecArray | null;
  if ((m = /^!\s*(\S+)$/.exec(term))) return checked({ key: m[1]!, op: 'notexists' }, fail);
  if ((m = /^(\S+?)\s*(==|=|!=)\s*(\S*)$/.exec(term))) {
    return checked({ key: m[1]!, op: m[2] === '!=' ? 'notin' : 'in', values: [m[3]!] }, fail);
  }
  if ((m = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(term))) {
    const values = m[3]!.split(',').map((v) => v.trim());
    return checked({ key: m[1]!, op: m[2] as 'in' | 'notin', values }, fail);
  }
  if ((m = /^(\S+)$/.exec(term))) return checked({ key: m[1]!, op: 'exists' }, fail);
  throw fail(`found '${term}', expected: in, notin, =, ==, !=, gt, lt`);
}

function checked(r: Requirement, fail: (why: string) => Error): Requirement {
  if (!KEY.test(r.key))
    throw fail(`key: Invalid value: "${r.key}": name part must consist of alphanumeric characters, '-', '_' or '.'`);
  for (const v of 'values' in r ? r.values : []) {
    if (!VALUE.test(v))
      throw fail(
        `values[0][${r.key}]: Invalid value: "${v}": a valid label must be an empty string or consist of ` +
          "alphanumeric characters, '-', '_' or '.'",
      );
  }
  return r;
}

/** A label selector (`a=b,c!=d,e in (x,y),!f`) as a predicate; a malformed one is a 400, as on a cluster. */
export function labelMatcher(selector: string | undefined): Matcher {
  if (selector === undefined || selector.trim() === '') return () => true;
  const reqs = terms(selector).map(requirement);
  return (labels = {}) =>
    reqs.every((r) => {
      const has = Object.hasOwn(labels, r.key);
      switch (r.op) {
        case 'exists':
          return has;
        case 'notexists':
          return !has;
        case 'in':
          return has && r.values.includes(labels[r.key]!);
        case 'notin':
          return !has || !r.values.includes(labels[r.key]!);
      }
    });
}

/**
 * A field selector over the fields the API server indexes for a resource (`status.phase=Running`);
 * an unsupported field is a 400 `field label not supported`, as on a cluster.
 */
export function fieldMatcher(selector: string | undefined, supported: readonly string[]): (obj: object) => boolean {
  if (selector === undefined || selector.trim() === '') return () => true;
  const reqs = terms(selector).map((term) => {
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${term}'`);
    const field = m[1]!;
    if (!supported.includes(field)) throw badRequest(`field label not supported: ${field}`);
    return { field, negate: m[2] === '!=', value: m[3]! };
  });
  return (obj) => reqs.every(({ field, negate, value }) => (fieldValue(obj, field) === value) !== negate);
}

function fieldValue(obj: object, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split('.')) cur = (cur as Record<string, unknown> | undefined)?.[part];
  return cur === undefined || cur === null ? '' : String(cur);
}

export const POD_FIELDS = [
  'metadata.name',
  'metadata.namespace',
  'spec.nodeName',
  'spec.restartPolicy',
  'spec.schedulerName',
  'spec.serviceAccountName',
  'status.phase',
  'status.podIP',
  'status.nominatedNodeName',
] as const;
export const SECRET_FIELDS = ['metadata.name', 'metadata.namespace', 'type'] as const;
export const EVENT_FIELDS = [
  'metadata.name',
  'metadata.namespace',
  'involvedObject.kind',
  'involvedObject.namespace',
  'involvedObject.name',
  'involvedObject.uid',
  'involvedObject.apiVersion',
  'involvedObject.resourceVersion',
  'involvedObject.fieldPath',
  'reason',
  'reportingComponent',
  'source',
  'type',
] as const;
