import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import { isQuantity, parseQuantity } from './quantity.ts';
import { ApiError, badRequest, invalid, type StatusCause } from './status.ts';
import type { K8sObject } from './store.ts';

/** What ajv (inside kubernetes-models) reports for one schema violation. */
interface SchemaError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: { missingProperty?: string; allowedValues?: unknown[]; type?: string };
}

const MODELS = { Pod, Secret } as const;
export type ValidatedKind = keyof typeof MODELS;

/** `/spec/containers/0/name` → `spec.containers[0].name`, the API server's field paths. */
export function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`))
    .join('');
}

/**
 * Checks an object against the real OpenAPI schema of its kind. Type mismatches fail decoding on a cluster
 * (400 BadRequest); missing or unsupported values fail validation (422 Invalid), and so they do here.
 */
export function checkSchema(kind: ValidatedKind, obj: K8sObject): void {
  if (obj.apiVersion !== undefined && obj.apiVersion !== 'v1') {
    throw badRequest(
      `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (v1)`,
    );
  }
  if (obj.kind !== undefined && obj.kind !== kind) {
    throw badRequest(`the kind in the data (${String(obj.kind)}) does not match the expected kind (${kind})`);
  }
  try {
    new MODELS[kind](obj as never).validate();
  } catch (err) {
    const errors = ((err as { errors?: SchemaError[] }).errors ?? []).filter((e) => e.keyword !== 'oneOf');
    if (errors.length === 0) throw err;
    const decoding = errors.find((e) => e.keyword === 'type' || e.keyword === 'format');
    if (decoding) {
      const path = fieldPath(decoding.instancePath);
      throw badRequest(
        `${kind} in version "v1" cannot be handled as a ${kind}: json: cannot unmarshal the value of ${path} ` +
          `(${decoding.message ?? 'wrong type'})`,
      );
    }
    throw invalid(kind, nameOf(obj), errors.map(schemaCause));
  }
}

function schemaCause(e: SchemaError): StatusCause {
  const base = fieldPath(e.instancePath);
  if (e.keyword === 'required') {
    const field = base ? `${base}.${e.params.missingProperty}` : String(e.params.missingProperty);
    return { reason: 'FieldValueRequired', message: 'Required value', field };
  }
  if (e.keyword === 'enum') {
    const allowed = (e.params.allowedValues ?? []).map((v) => JSON.stringify(v)).join(', ');
    return {
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: supported values: ${allowed}`,
      field: base,
    };
  }
  return { reason: 'FieldValueInvalid', message: `Invalid value: ${e.message ?? e.keyword}`, field: base };
}

export const nameOf = (obj: K8sObject): string => obj.metadata?.name ?? obj.metadata?.generateName ?? '';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Collects field errors with the API server's wording; `done()` throws them all as one 422. */
export class FieldErrors {
  readonly causes: StatusCause[] = [];
  constructor(
    private readonly kind: string,
    private readonly name: string,
  ) {}

  required(field: string): void {
    this.causes.push({ reason: 'FieldValueRequired', message: 'Required value', field });
  }
  invalid(field: string, value: unknown, why: string): void {
    this.causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(value)}: ${why}`,
      field,
    });
  }
  duplicate(field: string, value: unknown): void {
    this.causes.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: ${JSON.stringify(value)}`, field });
  }
  notFound(field: string, value: unknown): void {
    this.causes.push({ reason: 'FieldValueNotFound', message: `Not found: ${JSON.stringify(value)}`, field });
  }
  forbidden(field: string, why: string): void {
    this.causes.push({ reason: 'FieldValueForbidden', message: `Forbidden: ${why}`, field });
  }
  tooLong(field: string, max: number): void {
    this.causes.push({ reason: 'FieldValueTooLong', message: `Too long: must have at most ${max} bytes`, field });
  }
  dnsLabel(field: string, value: string): void {
    if (!DNS_LABEL.test(value) || value.length > 63) {
      this.invalid(
        field,
        value,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must " +
          "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is " +
          "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
      );
    }
  }
  dnsSubdomain(field: string, value: string): void {
    if (!DNS_SUBDOMAIN.test(value) || value.length > 253) {
      this.invalid(
        field,
        value,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
          "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is " +
          "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
      );
    }
  }
  quantity(field: string, value: unknown): number {
    if (!isQuantity(value)) this.invalid(field, value, 'must be a valid quantity');
    return parseQuantity(value as string);
  }
  done(): void {
    if (this.causes.length > 0) throw invalid(this.kind, this.name, this.causes);
  }
}

/** ObjectMeta rules every kind shares: a valid name (or generateName), valid labels. */
export function checkMeta(obj: K8sObject, errors: FieldErrors): void {
  const { name, generateName, labels = {} } = obj.metadata;
  if (name === undefined && generateName === undefined) errors.required('metadata.name');
  if (name !== undefined) errors.dnsSubdomain('metadata.name', name);
  for (const [k, v] of Object.entries(labels)) {
    if (!LABEL_KEY.test(k))
      errors.invalid('metadata.labels', k, "name part must consist of alphanumeric characters, '-', '_' or '.'");
    if (!LABEL_VALUE.test(String(v))) {
      errors.invalid(
        `metadata.labels`,
        v,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'",
      );
    }
  }
  for (const [i, ref] of (obj.metadata.ownerReferences ?? []).entries()) {
    if (!ref.uid) errors.invalid(`metadata.ownerReferences[${i}].uid`, ref.uid ?? '', 'uid must not be empty');
  }
}

export { ApiError };
