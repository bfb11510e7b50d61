import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkRoleGraph, criticalPath, roleDependants, roleLevels, type RoleNode } from "../../runtime/core/graph";

const r = (name: string, ...needs: string[]): RoleNode => ({ name, needs });

describe("checkRoleGraph", () => {
  it("accepts a DAG", () => {
    expect(checkRoleGraph([r("router"), r("mid", "router"), r("leaf", "mid", "router")])).toEqual([]);
  });

  it("names the full cycle path at the needs entry that closes it", () => {
    expect(checkRoleGraph([r("a", "b"), r("b", "c"), r("c", "a")])).toEqual([{ path: "roles[2].needs[0]", reason: "dependency cycle: a -> b -> c -> a" }]);
  });

  it("reports a cycle that does not include the first role", () => {
    expect(checkRoleGraph([r("root"), r("x", "root", "y"), r("y", "x")])).toEqual([{ path: "roles[2].needs[0]", reason: "dependency cycle: x -> y -> x" }]);
  });

  it("refuses self-loops, unknown and duplicate needs, duplicate names", () => {
    expect(checkRoleGraph([r("router"), r("agent", "agent", "db", "router", "router")])).toEqual([
      { path: "roles[1].needs[0]", reason: 'role "agent" needs itself' },
      { path: "roles[1].needs[1]", reason: 'unknown role "db" (known: router, agent)' },
      { path: "roles[1].needs[3]", reason: '"router" is listed twice' },
    ]);
    expect(checkRoleGraph([r("a"), r("b"), r("a")])).toEqual([{ path: "roles[2].name", reason: 'duplicate role name "a" (first defined at roles[0])' }]);
  });
});

describe("roleLevels / roleDependants / criticalPath", () => {
  const roles = [r("router"), r("db"), r("mid", "router"), r("leaf", "mid", "db")];

  it("computes levels and dependants", () => {
    expect(Object.fromEntries(roleLevels(roles))).toEqual({ router: 0, db: 0, mid: 1, leaf: 2 });
    expect(Object.fromEntries(roleDependants(roles))).toEqual({ router: ["mid"], db: ["leaf"], mid: ["leaf"], leaf: [] });
  });

  it("finds the longest chain of durations", () => {
    const ms: Record<string, number> = { router: 1000, db: 2500, mid: 1000, leaf: 500 };
    expect(criticalPath(roles, (name) => ms[name]!)).toEqual({ roles: ["db", "leaf"], totalMs: 3000 });
    ms.db = 1500;
    expect(criticalPath(roles, (name) => ms[name]!)).toEqual({ roles: ["router", "mid", "leaf"], totalMs: 2500 });
  });

  it("property: every edge of a random DAG goes to a strictly lower level; a back edge makes a cycle", () => {
    const dag = fc.integer({ min: 1, max: 12 }).chain((n) => fc.tuple(fc.constant(n), fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1)), { maxLength: 30 })));
    fc.assert(
      fc.property(dag, ([n, pairs]) => {
        // Edges only from a higher index to a lower one: always acyclic.
        const needs = Array.from({ length: n }, () => new Set<string>());
        for (const [a, b] of pairs) if (a > b) needs[a]!.add(`r${b}`);
        const roles = needs.map((set, i) => r(`r${i}`, ...set));
        expect(checkRoleGraph(roles)).toEqual([]);
        const levels = roleLevels(roles);
        for (const role of roles) for (const need of role.needs) expect(levels.get(role.name)!).toBeGreaterThan(levels.get(need)!);
        // Adding the reverse of any edge creates a cycle that is reported with a closed path.
        const edge = roles.find((role) => role.needs.length > 0);
        if (edge !== undefined) {
          const target = edge.needs[0]!;
          const cyclic = roles.map((role) => (role.name === target ? r(role.name, ...role.needs, edge.name) : role));
          const issues = checkRoleGraph(cyclic);
          expect(issues.length).toBeGreaterThan(0);
          for (const issue of issues) {
            const path = issue.reason.replace("dependency cycle: ", "").split(" -> ");
            expect(path[0]).toBe(path[path.length - 1]);
            for (let k = 0; k + 1 < path.length; k++) expect(cyclic.find((role) => role.name === path[k])!.needs).toContain(path[k + 1]);
          }
        }
      }),
    );
  });
});
