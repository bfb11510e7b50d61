/**
 * The role dependency graph of a cohort: checks (duplicate names, unknown `needs`, self-loops, cycles
 * with their full path) and topological levels.
 *
 * Edges are role-level: every member of role A needs every member of each role A lists in `needs`.
 * Keeping the graph at role level makes scheduling O(roles) per event instead of O(members^2) edges.
 * In a cycle path, `a -> b` means "a needs b".
 */

/** A role as the graph sees it. */
export interface RoleNode {
  readonly name: string;
  readonly needs: readonly string[];
}

/** One problem found in the graph; `path` is a RunSpec field path such as `roles[2].needs[0]`. */
export interface GraphIssue {
  readonly path: string;
  readonly reason: string;
}

/**
 * Checks the role graph: duplicate role names, duplicate or unknown `needs` entries, self-loops and
 * cycles. Every cycle reachable by a depth-first walk (roles and their needs in declaration order) is
 * reported once, at the `needs` entry that closes it, with its full path (`a -> b -> c -> a`).
 *
 * @returns the issues, in declaration order; empty when the graph is a DAG
 */
export function checkRoleGraph(roles: readonly RoleNode[]): GraphIssue[] {
  const issues: GraphIssue[] = [];
  const firstIndex = new Map<string, number>();
  roles.forEach((role, i) => {
    const first = firstIndex.get(role.name);
    if (first === undefined) firstIndex.set(role.name, i);
    else issues.push({ path: `roles[${i}].name`, reason: `duplicate role name "${role.name}" (first defined at roles[${first}])` });
  });
  const known = [...firstIndex.keys()];
  let edgesUsable = true;
  roles.forEach((role, i) => {
    const seen = new Set<string>();
    role.needs.forEach((need, j) => {
      const path = `roles[${i}].needs[${j}]`;
      if (need === role.name) {
        issues.push({ path, reason: `role "${role.name}" needs itself` });
        edgesUsable = false;
      } else if (!firstIndex.has(need)) {
        issues.push({ path, reason: `unknown role "${need}" (known: ${known.join(", ")})` });
        edgesUsable = false;
      } else if (seen.has(need)) {
        issues.push({ path, reason: `"${need}" is listed twice` });
      }
      seen.add(need);
    });
  });
  if (!edgesUsable || issues.some((issue) => issue.reason.startsWith("duplicate role name"))) return issues;
  issues.push(...findCycles(roles, firstIndex));
  return issues;
}

function findCycles(roles: readonly RoleNode[], indexOf: ReadonlyMap<string, number>): GraphIssue[] {
  const issues: GraphIssue[] = [];
  const state = new Map<string, "active" | "done">();
  const stack: string[] = [];
  const visit = (name: string): void => {
    state.set(name, "active");
    stack.push(name);
    const i = indexOf.get(name) as number;
    roles[i]!.needs.forEach((need, j) => {
      const s = state.get(need);
      if (s === "active") {
        const cycle = [...stack.slice(stack.indexOf(need)), need];
        issues.push({ path: `roles[${i}].needs[${j}]`, reason: `dependency cycle: ${cycle.join(" -> ")}` });
      } else if (s === undefined) {
        visit(need);
      }
    });
    stack.pop();
    state.set(name, "done");
  };
  for (const role of roles) if (!state.has(role.name)) visit(role.name);
  return issues;
}

/**
 * Topological level of each role: 0 for roles that need nothing, otherwise 1 + the highest level
 * among the roles it needs. Roles of one level never depend on each other.
 *
 * @param roles - a graph that passed {@link checkRoleGraph}
 * @returns role name -> level
 * @throws {Error} if the graph has a cycle or an unknown need (call {@link checkRoleGraph} first)
 */
export function roleLevels(roles: readonly RoleNode[]): Map<string, number> {
  const byName = new Map(roles.map((role) => [role.name, role]));
  const levels = new Map<string, number>();
  const inProgress = new Set<string>();
  const levelOf = (name: string): number => {
    const known = levels.get(name);
    if (known !== undefined) return known;
    const role = byName.get(name);
    if (role === undefined) throw new Error(`roleLevels: unknown role "${name}"`);
    if (inProgress.has(name)) throw new Error(`roleLevels: cycle through "${name}"`);
    inProgress.add(name);
    let level = 0;
    for (const need of role.needs) level = Math.max(level, levelOf(need) + 1);
    inProgress.delete(name);
    levels.set(name, level);
    return level;
  };
  for (const role of roles) levelOf(role.name);
  return levels;
}

/**
 * Roles that list `name` in their `needs` (its dependants), for every role.
 *
 * @returns role name -> names of the roles that need it, in declaration order
 */
export function roleDependants(roles: readonly RoleNode[]): Map<string, string[]> {
  const dependants = new Map<string, string[]>(roles.map((role) => [role.name, []]));
  for (const role of roles) for (const need of role.needs) dependants.get(need)?.push(role.name);
  return dependants;
}

/**
 * The critical path of a cohort given each role's start-to-ready duration: the chain of roles with the
 * largest summed duration, following `needs` edges. This is the lower bound on time to ready with
 * unbounded concurrency.
 *
 * @param durationMs - role name -> its members' start-to-ready time in ms
 * @returns the chain from a root (needs nothing) to the last role, and its total
 */
export function criticalPath(roles: readonly RoleNode[], durationMs: (role: string) => number): { readonly roles: string[]; readonly totalMs: number } {
  const byName = new Map(roles.map((role) => [role.name, role]));
  const best = new Map<string, { total: number; via: string | null }>();
  const solve = (name: string): number => {
    const known = best.get(name);
    if (known !== undefined) return known.total;
    let via: string | null = null;
    let before = 0;
    for (const need of byName.get(name)?.needs ?? []) {
      const total = solve(need);
      if (via === null || total > before) {
        via = need;
        before = total;
      }
    }
    const total = before + durationMs(name);
    best.set(name, { total, via });
    return total;
  };
  let end: string | null = null;
  let endTotal = -1;
  for (const role of roles) {
    const total = solve(role.name);
    if (total > endTotal) {
      end = role.name;
      endTotal = total;
    }
  }
  const chain: string[] = [];
  for (let at = end; at !== null; at = best.get(at)?.via ?? null) chain.unshift(at);
  return { roles: chain, totalMs: Math.max(endTotal, 0) };
}
