/**
 * Kubernetes resource quantities on the Pulumi side (pure; no Pulumi, no I/O): the ONE grammar and exact parser
 * that the quota arithmetic (components/k8s/quota.ts) and the stack config schema (stacks/cluster.ts) use.
 * (components/kind/steps.cjs, a CommonJS step script, keeps its own copy.)
 *
 * @see https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go (grammar)
 * @see https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#meaning-of-cpu
 */
import { CohortLabError } from "../errors.js";

/** `<sign><digits>.<digits><exponent | suffix>`; at least one digit is required (checked by the callers of the match). */
const QUANTITY_RE = /^([+-]?)(\d*)(?:\.(\d*))?(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;
const BINARY: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL_EXP: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** Why a text is not a usable quantity: not the grammar, a negative amount, or more than a safe integer after scaling. */
export type QuantityProblem = "malformed" | "negative" | "too large";

/** A quantity was refused; `problem` says why (the caller words the message with its own key). */
export class QuantityError extends CohortLabError {
  constructor(
    readonly text: string,
    readonly problem: QuantityProblem,
  ) {
    super(`${JSON.stringify(text)}: ${problem} Kubernetes quantity`);
    this.name = "QuantityError";
  }
}

function match(text: string): { sign: string; int: string; frac: string; exp?: string; suffix?: string } | undefined {
  const m = QUANTITY_RE.exec(text);
  if (m === null) return undefined;
  const [, sign = "", int = "", frac = "", exp, suffix] = m;
  if (int === "" && frac === "") return undefined;
  return { sign, int, frac, ...(exp !== undefined ? { exp } : {}), ...(suffix !== undefined ? { suffix } : {}) };
}

/**
 * Whether `text` is, exactly as written (no surrounding blanks), a non-negative Kubernetes quantity such as
 * `8`, `7500m`, `16Gi`, `1e3`.
 */
export function isQuantity(text: string): boolean {
  const m = match(text);
  return m !== undefined && m.sign !== "-";
}

/**
 * Parses a Kubernetes quantity exactly (decimal and binary suffixes, exponents; surrounding blanks ignored) and scales it.
 *
 * @param scale - 1000 for CPU in millicores, 1 for bytes
 * @returns the value × scale, rounded UP to an integer (Kubernetes rounds CPU requests up to 1m)
 * @throws {QuantityError} for a malformed, negative or too large quantity
 */
export function parseQuantityValue(text: string, scale: number): number {
  const m = match(text.trim());
  if (m === undefined) throw new QuantityError(text, "malformed");
  if (m.sign === "-") throw new QuantityError(text, "negative");
  let num = BigInt(`${m.int}${m.frac}` || "0") * BigInt(scale);
  let den = 10n ** BigInt(m.frac.length);
  const power = m.exp !== undefined ? Number(m.exp.slice(1)) : m.suffix !== undefined && m.suffix in DECIMAL_EXP ? DECIMAL_EXP[m.suffix]! : 0;
  if (m.suffix !== undefined && m.suffix in BINARY) num *= BINARY[m.suffix]!;
  if (power >= 0) num *= 10n ** BigInt(power);
  else den *= 10n ** BigInt(-power);
  const value = (num + den - 1n) / den;
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new QuantityError(text, "too large");
  return Number(value);
}
