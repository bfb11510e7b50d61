/**
 * Validates custom resources against a CRD's `openAPIV3Schema` with ajv, the way kube-apiserver reads a
 * structural schema (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation):
 *
 * - unknown fields: the API server prunes them (or, with `fieldValidation=Strict` — kubectl's default for
 *   server-side apply — refuses them). Pruning would silently drop a typo, so here every object schema with
 *   `properties` and neither `additionalProperties` nor `x-kubernetes-preserve-unknown-fields: true` gets
 *   `additionalProperties: false`: an unknown field is an error;
 * - `x-kubernetes-int-or-string: true`: an integer or a string;
 * - `x-kubernetes-list-type: set` items unique; `map` items unique by `x-kubernetes-list-map-keys`;
 * - formats `int32`, `int64` (integer ranges) and `date-time` (RFC 3339);
 * - `x-kubernetes-validations` (CEL rules) are NOT evaluated here; {@link celRuleCount} says how many a schema
 *   has, and the `sim` profile applies the same objects to a real API server, which evaluates them.
 * - `metadata` is checked by the API server's ObjectMeta rules, not by the CRD schema; the callers check names.
 */
import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import type { KubernetesObject } from "../../components/k8s/manifests/cache.js";

type Schema = { [key: string]: unknown };

function transform(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(transform);
  if (node === null || typeof node !== "object") return node;
  const src = node as Schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(src)) {
    if (key === "x-kubernetes-validations") continue;
    out[key] = key === "properties" || key === "patternProperties" ? Object.fromEntries(Object.entries(value as Schema).map(([k, v]) => [k, transform(v)])) : transform(value);
  }
  if (src["x-kubernetes-int-or-string"] === true && out.anyOf === undefined) {
    delete out.type;
    out.anyOf = [{ type: "integer" }, { type: "string" }];
  }
  if (src.properties !== undefined && src.additionalProperties === undefined && src["x-kubernetes-preserve-unknown-fields"] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

function countCel(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((n: number, v) => n + countCel(v), 0);
  if (node === null || typeof node !== "object") return 0;
  let n = 0;
  for (const [key, value] of Object.entries(node as Schema)) n += key === "x-kubernetes-validations" ? (value as unknown[]).length : countCel(value);
  return n;
}

function makeAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
  ajv.addFormat("int32", { type: "number", validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat("int64", { type: "number", validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat("date-time", /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  ajv.addKeyword({
    keyword: "x-kubernetes-list-type",
    type: "array",
    schemaType: "string",
    validate: function listType(this: unknown, kind: string, data: unknown[], parent?: Schema) {
      if (kind === "atomic") return true;
      const keyOf =
        kind === "set"
          ? (item: unknown) => JSON.stringify(item)
          : (item: unknown) => JSON.stringify(((parent?.["x-kubernetes-list-map-keys"] as string[]) ?? []).map((k) => (item as Schema)[k]));
      return new Set(data.map(keyOf)).size === data.length;
    },
    errors: false,
  });
  return ajv;
}

/** A compiled validator for one kind and version. */
export interface CrdValidator {
  readonly group: string;
  readonly kind: string;
  readonly version: string;
  /** CEL rules in the schema that this validator does not evaluate. */
  readonly celRuleCount: number;
  /** Validation errors as `<instancePath> <message>` lines; empty when valid. */
  validate(obj: KubernetesObject): string[];
}

/**
 * Compiles the validator of `version` of a CRD.
 *
 * @throws {Error} when the CRD has no such served version or no schema
 */
export function crdValidator(crd: KubernetesObject, version: string): CrdValidator {
  const spec = crd.spec as { group: string; names: { kind: string }; versions: { name: string; served: boolean; schema?: { openAPIV3Schema: unknown } }[] };
  const v = spec.versions.find((x) => x.name === version);
  if (v === undefined || !v.served || v.schema === undefined) throw new Error(`${crd.metadata.name} serves no version ${version} with a schema`);
  const schema = transform(v.schema.openAPIV3Schema) as Schema;
  const fn: ValidateFunction = makeAjv().compile(schema);
  return {
    group: spec.group,
    kind: spec.names.kind,
    version,
    celRuleCount: countCel(v.schema.openAPIV3Schema),
    validate(obj) {
      const problems: string[] = [];
      if (obj.apiVersion !== `${spec.group}/${version}`) problems.push(`apiVersion is ${obj.apiVersion}, expected ${spec.group}/${version}`);
      if (obj.kind !== spec.names.kind) problems.push(`kind is ${obj.kind}, expected ${spec.names.kind}`);
      if (!fn(obj))
        problems.push(
          ...(fn.errors ?? []).map(
            (e: ErrorObject) => `${e.instancePath || "/"} ${e.message ?? e.keyword}${e.keyword === "additionalProperties" ? ` (${String(e.params.additionalProperty)})` : ""}`,
          ),
        );
      return problems;
    },
  };
}

/** The CRD named `name` among `objects`. @throws {Error} when absent */
export function findCrd(objects: readonly KubernetesObject[], name: string): KubernetesObject {
  const crd = objects.find((o) => o.kind === "CustomResourceDefinition" && o.metadata.name === name);
  if (crd === undefined) throw new Error(`no CustomResourceDefinition ${name}`);
  return crd;
}
