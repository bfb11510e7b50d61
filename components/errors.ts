/**
 * The one error base of the Pulumi side: every refusal that components/ and stacks/ raise on purpose (a bad config
 * key, a missing prerequisite, a manifest of the wrong shape) is a {@link CohortLabError}. A bad component argument
 * is a `pulumi.InputPropertyError` instead (the SDK's own type for it); the runtime's errors are `CohortError`
 * (runtime/core/errors.ts).
 *
 * This module imports nothing: components/kind/app-images.ts (loaded by the toolchain under the system Node) and
 * components/k8s/manifests/* (loaded by simctl/) extend it without loading `@pulumi/pulumi`.
 */

/** What a {@link CohortLabError} may carry besides its message. */
export interface CohortLabErrorOptions {
  /** The config key or argument path the error is about, e.g. `cohort-lab:local.queue.cpu` or `workers`. */
  readonly propertyPath?: string;
  readonly cause?: unknown;
}

/**
 * A refusal of the Pulumi side. The Pulumi program prints it without a stack trace, as it prints a
 * `pulumi.RunError`: the SDK recognises a RunError by a brand field rather than by its prototype (so that two
 * copies of the SDK in one process agree, `RunError.isInstance`), and this class carries the same brand. Where a
 * real `pulumi.RunError` is wanted (a profile's plan), stacks/errors.ts `asRunError` converts it.
 */
export class CohortLabError extends Error {
  /** The config key or argument path the error is about, when it is about one. */
  readonly propertyPath: string | undefined;

  constructor(message: string, options: CohortLabErrorOptions = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = "CohortLabError";
    this.propertyPath = options.propertyPath;
    // The brand of `pulumi.RunError` (@pulumi/pulumi errors.js): not enumerable, so it shows in no comparison or dump.
    Object.defineProperty(this, "__pulumiRunError", { value: true, enumerable: false });
  }
}
