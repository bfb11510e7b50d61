/**
 * Waiting for a condition the kernel sends no event for (a process group, or a cgroup, that has become empty),
 * by polling: ./status.ts `GroupWatcher` and ./cgroup.ts `CgroupWatcher` are built on it.
 *
 * While at least one waiter is pending, ONE timer runs every `intervalMs` and checks every subject awaited, in one
 * batch (so a check that costs a /proc scan is paid once per tick, not once per waiter). Nothing runs when no waiter
 * is pending: a waiter whose signal aborts is dropped at once, and the timer stops with the last one, so a caller
 * that gives up (a grace period over, a stop that threw) leaves no polling behind it.
 */

/**
 * Pending waits on subjects of type `S`, each named by a string id (waits on the same id share one check).
 */
export class PollingWaiters<S> {
  private readonly pending = new Map<string, { readonly subject: S; readonly resolvers: Set<(settled: boolean) => void> }>();
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param intervalMs the period of the checks, in ms
   * @param settledOf one check: given every awaited subject (id -> subject), the ids of those whose condition now
   *   holds. It must not throw (a subject it cannot check is simply not settled yet).
   */
  constructor(
    private readonly intervalMs: number,
    private readonly settledOf: (awaited: ReadonlyMap<string, S>) => Iterable<string>,
  ) {}

  /** How many ids are awaited now (0 once every waiter has settled or given up: no timer is then running). */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Waits until a check reports `id` settled.
   *
   * @param subject what the check needs to know of `id` (the first waiter's is kept while `id` is awaited)
   * @param signal gives up the wait when it aborts: the waiter is dropped and no further check runs for it
   * @returns true once `id` is settled; false when `signal` aborted first (or had already)
   */
  wait(id: string, subject: S, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted === true) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const entry = this.pending.get(id) ?? { subject, resolvers: new Set<(settled: boolean) => void>() };
      this.pending.set(id, entry);
      const onAbort = (): void => {
        entry.resolvers.delete(settle);
        if (entry.resolvers.size === 0 && this.pending.get(id) === entry) this.pending.delete(id);
        if (this.pending.size === 0 && this.timer !== null) {
          clearTimeout(this.timer);
          this.timer = null;
        }
        resolve(false);
      };
      const settle = (settled: boolean): void => {
        signal?.removeEventListener("abort", onAbort);
        resolve(settled);
      };
      entry.resolvers.add(settle);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.arm();
    });
  }

  private arm(): void {
    if (this.timer !== null || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      try {
        const awaited = new Map([...this.pending].map(([id, entry]) => [id, entry.subject] as const));
        for (const id of this.settledOf(awaited)) {
          const entry = this.pending.get(id);
          if (entry === undefined) continue;
          this.pending.delete(id);
          for (const settle of entry.resolvers) settle(true);
        }
      } catch {
        // a check that failed (it should not: see the constructor) settles nothing this tick; the next one retries
      } finally {
        this.arm();
      }
    }, this.intervalMs);
  }
}
