/**
 * Member plans: everything a backend needs to start one member, resolved by the core (runtime/README.md
 * "Member environment").
 *
 * Environment of every member, in this order (later entries may reference earlier ones with `$(NAME)`):
 * - `COHORT_RUN_ID`, `COHORT_ROLE`, `COHORT_INDEX` (0-based), `COHORT_MEMBER` (`<role>-<index>`),
 *   `COHORT_PORT` (omitted when the role set `app.port: false`), `COHORT_NEEDS` (JSON object: each
 *   needed role -> `["host:port", ...]` of its members, in index order; `[]` for a role without ports),
 *   `COHORT_MEMBER_DIR` (`<runDir>/members/<member>`: the member's own directory and working directory);
 * - one fresh secret token per `app.secretEnv` name;
 * - `app.env`, expanded in declaration order (Kubernetes semantics, ./expand.ts).
 * `app.command` and `readiness.exec.command` are expanded against the complete environment.
 */
import * as path from "node:path";
import type { MemberEndpoint, MemberIdentity, MemberPlan } from "./backend";
import { expandEnv, expandVars, referencedVars } from "./expand";
import type { CompiledReadiness, CompiledRunSpec } from "./spec";

/** `<runDir>/members/<member>`: a member's own directory (its files, its output.log, its cwd). */
export function memberDir(runDir: string, member: string): string {
  return path.join(runDir, "members", member);
}

/** Every member of a compiled spec, in role declaration order then index order. */
export function memberIdentities(spec: CompiledRunSpec): MemberIdentity[] {
  return spec.roles.flatMap((role) => role.members.map((id, index) => ({ id, role: role.name, index, wantsPort: role.port })));
}

/** Input of {@link planMembers}. */
export interface PlanInput {
  readonly spec: CompiledRunSpec;
  readonly runId: string;
  /** Absolute run directory `<artifacts>/<runId>`. */
  readonly runDir: string;
  /** Member id -> address; members whose role has `app.port: false` may be missing. */
  readonly endpoints: ReadonlyMap<string, MemberEndpoint>;
  /** Member id -> secret env name -> token. */
  readonly secrets: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/**
 * Plans every member (role declaration order, then index).
 *
 * @throws {Error} if a member that wants a port has no endpoint (a backend bug)
 */
export function planMembers(input: PlanInput): MemberPlan[] {
  const { spec, runId, runDir, endpoints, secrets } = input;
  const address = (member: string): string | undefined => {
    const endpoint = endpoints.get(member);
    return endpoint === undefined ? undefined : `${endpoint.host}:${endpoint.port}`;
  };
  const byName = new Map(spec.roles.map((role) => [role.name, role]));
  const plans: MemberPlan[] = [];
  for (const role of spec.roles) {
    const needs: Record<string, string[]> = {};
    for (const need of role.needs) {
      const needed = byName.get(need)!;
      needs[need] = needed.port ? needed.members.map((member) => address(member) ?? "") : [];
    }
    const needsJson = JSON.stringify(needs);
    role.members.forEach((id, index) => {
      const endpoint = endpoints.get(id);
      if (role.port && endpoint === undefined) throw new Error(`planMembers: no endpoint assigned to member ${id}`);
      const dir = memberDir(runDir, id);
      const base: Record<string, string> = {
        COHORT_RUN_ID: runId,
        COHORT_ROLE: role.name,
        COHORT_INDEX: String(index),
        COHORT_MEMBER: id,
        ...(role.port ? { COHORT_PORT: String(endpoint!.port) } : {}),
        COHORT_NEEDS: needsJson,
        COHORT_MEMBER_DIR: dir,
      };
      const memberSecrets = secrets.get(id) ?? {};
      for (const name of role.secretEnv) {
        if (memberSecrets[name] === undefined) throw new Error(`planMembers: no secret generated for ${id} ${name}`);
        base[name] = memberSecrets[name];
      }
      const env = expandEnv(base, role.env);
      const secretNames = new Set(role.secretEnv);
      for (const [name, value] of Object.entries(role.env)) {
        if (referencedVars(value).some((ref) => secretNames.has(ref))) secretNames.add(name);
      }
      const readiness: CompiledReadiness = role.readiness.kind === "exec" ? { kind: "exec", command: role.readiness.command.map((arg) => expandVars(arg, env)) } : role.readiness;
      plans.push({
        id,
        role: role.name,
        index,
        runId,
        command: role.command.map((arg) => expandVars(arg, env)),
        env,
        secretEnv: [...secretNames],
        image: role.image,
        resources: role.resources,
        port: endpoint?.port ?? 0,
        workDir: dir,
        files: role.files,
        readiness,
      });
    });
  }
  return plans;
}
