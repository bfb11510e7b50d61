/**
 * Kubernetes resource quantities (`100m`, `1.5`, `128Mi`, `1e3`): the one parser on the runtime side (the
 * RunSpec validator, runtime/core/spec.ts, and the Kubernetes backend's pod shapes, runtime/backends/kubernetes/render.ts).
 *
 * The grammar, as upstream states it (https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go):
 *
 * ```
 * <quantity>        ::= <signedNumber><suffix>
 * <signedNumber>    ::= <number> | <sign><number>
 * <sign>            ::= "+" | "-"
 * <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
 * <digits>          ::= <digit> | <digit><digits>
 * <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
 * <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
 * <decimalSI>       ::= m | "" | k | M | G | T | P | E
 * <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
 * ```
 *
 * plus the decimal suffixes `n` and `u` that upstream's parser accepts too (suffix.go), and an integer
 * exponent (what upstream's parser reads of a `<decimalExponent>`). Like `resource.ParseQuantity`, no
 * surrounding whitespace is accepted. Upstream rounds a quantity up (away from zero) when asked for a
 * smaller scale (`MilliValue`, `Value`); {@link cpuMillicores} and {@link memoryBytes} do the same, exactly
 * (decimal arithmetic, no floating-point error).
 */

/** The grammar above: sign and number, then either an exponent or an SI suffix. */
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

/** binarySI suffix -> power of two. */
const BINARY: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
/** decimalSI suffix -> power of ten. */
const DECIMAL: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** suffix -> factor, as literals (`10 ** -3` need not be exactly `1e-3`). */
const FACTORS: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** A parsed quantity: `sign * digits * 10^pow10 * 2^pow2`, exactly. */
export interface Quantity {
  readonly negative: boolean;
  /** The number's digits without the decimal point (`1.5` -> 15n). */
  readonly digits: bigint;
  /** Power of ten: the exponent or decimalSI suffix minus the fraction's length (`1.5k` -> 2). */
  readonly pow10: number;
  /** Power of two of a binarySI suffix (`Mi` -> 20), else 0. */
  readonly pow2: number;
}

/** Parses `text` by the grammar above; `undefined` when it is not a quantity. */
export function parseQuantity(text: string): Quantity | undefined {
  const match = QUANTITY.exec(text);
  if (match === null) return undefined;
  const [, sign, number, exponent, suffix] = match;
  const [whole, fraction = ""] = number!.split(".");
  const pow10 = (exponent !== undefined ? Number(exponent) : suffix !== undefined ? (DECIMAL[suffix] ?? 0) : 0) - fraction.length;
  if (!Number.isSafeInteger(pow10)) return undefined;
  return { negative: sign === "-", digits: BigInt(`${whole}${fraction}` || "0"), pow10, pow2: suffix !== undefined ? (BINARY[suffix] ?? 0) : 0 };
}

/** True when `text` is a Kubernetes quantity (any sign). */
export function isQuantity(text: string): boolean {
  return parseQuantity(text) !== undefined;
}

/** True when `text` is a quantity without a minus sign (what a resource request may be). */
export function isNonNegativeQuantity(text: string): boolean {
  const q = parseQuantity(text);
  return q !== undefined && !q.negative;
}

/**
 * The quantity in base units as a floating-point number (`100m` -> 0.1, `1Gi` -> 1073741824), for comparing
 * shapes; surrounding whitespace is ignored (as upstream's JSON decoding does). `NaN` for text that is not a quantity.
 */
export function quantityValue(text: string): number {
  const match = QUANTITY.exec(text.trim());
  if (match === null) return Number.NaN;
  const [, sign, number, exponent, suffix] = match;
  const base = Number(`${sign}${number}`);
  if (exponent !== undefined) return base * 10 ** Number(exponent);
  if (suffix === undefined) return base;
  return base * FACTORS[suffix]!;
}

/** `q * 10^scale` as an integer, rounded up (away from zero) like upstream's `ScaledValue`. */
function scaledInteger(q: Quantity, scale: number): number {
  if (q.digits === 0n) return 0;
  // Beyond these the result is Infinity or 1 anyway; spares a bigint of a million digits for `1e999999`.
  if (q.pow10 + scale > 400) return q.negative ? -Infinity : Infinity;
  if (q.pow10 + scale < -400) return q.negative ? -1 : 1;
  let n = q.digits * 2n ** BigInt(q.pow2);
  const pow10 = q.pow10 + scale;
  if (pow10 >= 0) n *= 10n ** BigInt(pow10);
  else {
    const d = 10n ** BigInt(-pow10);
    n = (n + d - 1n) / d;
  }
  const value = Number(n);
  return q.negative && value !== 0 ? -value : value;
}

/** CPU in millicores (`100m` -> 100, `1.5` -> 1500, `1u` -> 1: rounded up); `undefined` when not a quantity. */
export function cpuMillicores(text: string): number | undefined {
  const q = parseQuantity(text);
  return q === undefined ? undefined : scaledInteger(q, 3);
}

/** Memory in bytes (`128Mi` -> 134217728, `1G` -> 1e9, `1500m` -> 2: rounded up); `undefined` when not a quantity. */
export function memoryBytes(text: string): number | undefined {
  const q = parseQuantity(text);
  return q === undefined ? undefined : scaledInteger(q, 0);
}
