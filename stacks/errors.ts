/**
 * The one conversion of the Pulumi side's refusals into a `pulumi.RunError`. A components/errors.ts `CohortLabError`
 * already prints without a stack trace (it carries RunError's brand); a profile's build runs its plan through
 * {@link refusing} so that what it throws is a RunError to `instanceof` as well, with the refusal as its `cause`.
 * A `pulumi.InputPropertyError` (a bad component argument: a bug of the caller, not of the config) is not converted:
 * its stack trace is the useful part.
 */
import * as pulumi from "@pulumi/pulumi";
import { CohortLabError } from "../components/errors.js";

/**
 * `error` as a `pulumi.RunError` when it is a {@link CohortLabError}: same message and name, `propertyPath` kept,
 * the original as `cause`. Anything else is returned as it is.
 */
export function asRunError(error: unknown): unknown {
  if (!(error instanceof CohortLabError)) return error;
  const converted = new pulumi.RunError(error.message, { cause: error });
  converted.name = error.name;
  return Object.assign(converted, { propertyPath: error.propertyPath });
}

/**
 * Runs `build`, throwing its refusals as `pulumi.RunError` ({@link asRunError}).
 *
 * @throws {pulumi.RunError} for a refusal; anything else as thrown
 */
export function refusing<T>(build: () => T): T {
  try {
    return build();
  } catch (error) {
    throw asRunError(error);
  }
}
