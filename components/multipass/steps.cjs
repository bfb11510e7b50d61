#!/usr/bin/env node
// @ts-check
/**
 * Host-side steps of `MultipassFleet` (components/multipass/MultipassFleet.ts), run by one `@pulumi/command`
 * `local.Command` per VM with the Node binary that runs the Pulumi program. Plain CommonJS with Node built-ins (and
 * components/run/job-steps.cjs), so it runs without a build step. Inputs arrive in the environment; the cloud-init
 * user-data on stdin (never in a command line: it is handed to `multipass launch --cloud-init -` on its stdin).
 * Progress goes to stderr; stdout carries only the result.
 *
 * - `launch`: one VM, reconciled with what exists (Multipass 1.16, field notes C15 and canonical/multipass #3200):
 *     1. `multipass info NAME --format json`. An instance of that name is adopted only when it is Running and its owner
 *        marker (`/etc/cohort-lab/multipass-owner`, written by cloud-init from the user-data the component adds it
 *        to; line 1 the owner, an optional line 2 the launch id) holds COHORT_MP_OWNER, read after `cloud-init status --wait`. Any other instance of that name (another
 *        owner, no marker, Stopped, Deleted) is refused and left untouched;
 *     2. otherwise `multipass launch IMAGE --name NAME --cpus --memory --disk --cloud-init - --timeout`. A launch
 *        that fails with Multipass's timeout (exit 5, or `timed out waiting for ...`) or `already exists` is
 *        reconciled once with `multipass info`: an instance that is there is carried on with (adopted once, never a
 *        second launch); one that is not fails the step;
 *     3. readiness: `multipass exec NAME -- cloud-init status --wait` (exit 0 done, 2 done with recoverable
 *        errors: a warning; anything else fails with `cloud-init status --long`), then the owner marker;
 *     4. stdout: `{"instance": NAME, "ipv4": "<first address of info's ipv4>", "adopted": bool}`.
 * - `delete`: idempotent. An instance that does not exist is reported and skipped (deleted by hand); one whose
 *   owner marker is not COHORT_MP_OWNER (or that is Deleted, so the marker cannot be read) is reported and left
 *   alone (a Stopped one is started by `multipass exec` to read the marker, and stopped again when it is foreign); this stack's is removed with `multipass delete --purge`, whose `does not exist` also counts as done.
 *
 * Environment: COHORT_MULTIPASS (the CLI), COHORT_MP_INSTANCE, COHORT_MP_OWNER, and for `launch` COHORT_MP_IMAGE,
 * COHORT_MP_CPUS, COHORT_MP_MEMORY, COHORT_MP_DISK, COHORT_MP_LAUNCH_TIMEOUT (s), COHORT_MP_READY_TIMEOUT (s);
 * anything else (the stand-in's MULTIPASS_STANDIN_*) is passed to the CLI. Exit 0 done, 1 refused or failed (message on
 * stderr), 2 usage.
 */
"use strict";

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const shared = require("../run/job-steps.cjs");
const { StepError, log, env, tail, sleep, runStepProgram } = shared;

shared.setLogPrefix("[cohort-lab multipass]");

/** Where cloud-init writes the owner marker in each VM (the component adds the `write_files` entry). */
const OWNER_FILE = "/etc/cohort-lab/multipass-owner";

/**
 * Runs the multipass CLI.
 *
 * @param {readonly string[]} args
 * @param {{ input?: string, timeoutMs?: number }} [o]
 * @returns {{ status: number, stdout: string, stderr: string, timedOut: boolean }}
 */
function mp(args, o = {}) {
  const r = spawnSync(env("COHORT_MULTIPASS"), args, {
    input: o.input ?? "",
    encoding: "utf8",
    timeout: o.timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ["pipe", "pipe", "pipe"],
  });
  if (r.error !== undefined && /** @type {NodeJS.ErrnoException} */ (r.error).code !== "ETIMEDOUT") {
    throw new StepError(`multipass (${process.env.COHORT_MULTIPASS}) could not start: ${r.error.message}`);
  }
  return { status: r.status ?? 1, stdout: r.stdout ?? "", stderr: r.stderr ?? "", timedOut: r.error !== undefined };
}

/**
 * `multipass info NAME --format json`: the instance's entry, or undefined when it does not exist.
 *
 * @param {string} name
 * @returns {{ state: string, ipv4: string[] } | undefined}
 */
function info(name) {
  const r = mp(["info", name, "--format", "json"]);
  if (r.status !== 0) {
    if (/does not exist/.test(r.stderr)) return undefined;
    throw new StepError(`multipass info ${name} failed (exit ${r.status}): ${tail(r.stderr, 5)}`);
  }
  let parsed;
  try {
    parsed = JSON.parse(r.stdout);
  } catch {
    throw new StepError(`multipass info ${name} --format json printed no JSON: ${tail(r.stdout, 3)}`);
  }
  const entry = parsed?.info?.[name];
  if (entry === undefined || typeof entry.state !== "string") throw new StepError(`multipass info ${name}: no info.${name}.state in ${tail(r.stdout, 5)}`);
  return { state: entry.state, ipv4: Array.isArray(entry.ipv4) ? entry.ipv4.filter((/** @type {unknown} */ a) => typeof a === "string") : [] };
}

/**
 * The owner recorded in a running instance's marker (`multipass exec NAME -- cat OWNER_FILE`): its first line (the
 * second, `launch-id: <id>`, is the component's business), or undefined when the marker is absent.
 *
 * @param {string} name
 */
function ownerOf(name) {
  const r = mp(["exec", name, "--", "cat", OWNER_FILE], { timeoutMs: 60_000 });
  if (r.status === 0) return (r.stdout.split("\n")[0] ?? "").trim();
  if (/No such file/.test(r.stderr) || r.status === 1) return undefined;
  throw new StepError(`multipass exec ${name} -- cat ${OWNER_FILE} failed (exit ${r.status}): ${tail(r.stderr, 5)}`);
}

/**
 * `cloud-init status --wait` in the instance, within COHORT_MP_READY_TIMEOUT seconds.
 *
 * @param {string} name
 * @throws {StepError} cloud-init failed, or did not finish in time
 */
function waitCloudInit(name) {
  const seconds = Number(process.env.COHORT_MP_READY_TIMEOUT ?? "600");
  const started = Date.now();
  const r = mp(["exec", name, "--", "cloud-init", "status", "--wait"], { timeoutMs: seconds * 1000 });
  if (r.timedOut) throw new StepError(`${name}: cloud-init did not finish within ${seconds} s (COHORT_MP_READY_TIMEOUT)`);
  if (r.status === 2) log(`${name}: cloud-init finished with recoverable errors: ${tail(r.stdout, 3)}`);
  else if (r.status !== 0) {
    const long = mp(["exec", name, "--", "cloud-init", "status", "--long"], { timeoutMs: 60_000 });
    throw new StepError(`${name}: cloud-init failed (cloud-init status exit ${r.status}):\n${tail(long.stdout || r.stdout || r.stderr, 15)}`);
  }
  log(`${name}: cloud-init done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * Refuses an instance of our name that this stack cannot prove it made.
 *
 * @param {string} name
 * @param {string} why
 */
function foreign(name, why) {
  return new StepError(
    `multipass instance "${name}" exists but ${why}: refusing to adopt or change it. It was left untouched; delete it (multipass delete --purge ${name}) or choose another prefix`,
  );
}

/**
 * Carries on with an existing instance: Running, cloud-init done, owner marker ours.
 *
 * @param {string} name
 * @param {{ state: string }} found
 */
function checkOurs(name, found) {
  const owner = env("COHORT_MP_OWNER");
  if (found.state !== "Running" && found.state !== "Starting") {
    throw foreign(name, `is ${found.state}, so its owner marker cannot be read without changing it`);
  }
  waitCloudInit(name);
  const marker = ownerOf(name);
  if (marker === undefined) throw foreign(name, `has no owner marker ${OWNER_FILE}`);
  if (marker !== owner) throw foreign(name, `its owner marker says ${JSON.stringify(marker)}, not this stack's ${JSON.stringify(owner)}`);
}

/**
 * The instance's first IPv4 address from `multipass info` (retried for up to 30 s while the list is empty).
 *
 * @param {string} name
 */
async function ipv4Of(name) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const found = info(name);
    if (found === undefined) throw new StepError(`multipass instance "${name}" disappeared while it was being launched`);
    if (found.ipv4.length > 0) return /** @type {string} */ (found.ipv4[0]);
    if (Date.now() > deadline) throw new StepError(`multipass info ${name}: no IPv4 address (state ${found.state})`);
    await sleep(1000);
  }
}

async function launch() {
  const name = env("COHORT_MP_INSTANCE");
  env("COHORT_MP_OWNER");
  const userData = fs.readFileSync(0, "utf8");
  const existing = info(name);
  if (existing !== undefined) {
    log(`${name}: exists (${existing.state}); checking its owner marker`);
    checkOurs(name, existing);
    log(`${name}: adopted (owner marker matches)`);
    process.stdout.write(`${JSON.stringify({ instance: name, ipv4: await ipv4Of(name), adopted: true })}\n`);
    return;
  }
  const args = [
    "launch",
    env("COHORT_MP_IMAGE"),
    "--name",
    name,
    "--cpus",
    env("COHORT_MP_CPUS"),
    "--memory",
    env("COHORT_MP_MEMORY"),
    "--disk",
    env("COHORT_MP_DISK"),
    "--cloud-init",
    "-",
    "--timeout",
    env("COHORT_MP_LAUNCH_TIMEOUT"),
  ];
  log(`${name}: multipass ${args.join(" ")}`);
  const started = Date.now();
  const r = mp(args, { input: userData });
  let adopted = false;
  if (r.status !== 0) {
    const timedOut = r.status === 5 || /timed out waiting/i.test(r.stderr);
    const exists = /already exists/.test(r.stderr);
    if (!timedOut && !exists) throw new StepError(`multipass launch ${name} failed (exit ${r.status}): ${tail(r.stderr, 10)}`);
    // Never launch again (canonical/multipass #3200): look at what is there, once.
    const found = info(name);
    if (found === undefined) throw new StepError(`multipass launch ${name} failed (exit ${r.status}: ${tail(r.stderr, 3)}) and no instance of that name exists`);
    log(
      `${name}: launch reported ${JSON.stringify(tail(r.stderr, 1))} after ${((Date.now() - started) / 1000).toFixed(1)} s; the instance is ${found.state}: reconciling, not relaunching`,
    );
    if (exists) {
      checkOurs(name, found);
      adopted = true;
    } else if (found.state !== "Running" && found.state !== "Starting") {
      throw new StepError(
        `multipass launch ${name} timed out and the instance is ${found.state}; inspect it (multipass info ${name}) and delete it (multipass delete --purge ${name}) before the next up`,
      );
    }
  } else log(`${name}: launched in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (!adopted) {
    waitCloudInit(name);
    const marker = ownerOf(name);
    if (marker !== env("COHORT_MP_OWNER")) {
      throw new StepError(
        `${name}: cloud-init finished but the owner marker ${OWNER_FILE} is ${marker === undefined ? "missing" : JSON.stringify(marker)} (the user-data's write_files did not apply)`,
      );
    }
  }
  process.stdout.write(`${JSON.stringify({ instance: name, ipv4: await ipv4Of(name), adopted })}\n`);
}

async function del() {
  const name = env("COHORT_MP_INSTANCE");
  const owner = env("COHORT_MP_OWNER");
  const found = info(name);
  if (found === undefined) {
    log(`${name}: does not exist (deleted out of band); nothing to delete`);
    return;
  }
  if (found.state === "Deleted") {
    log(`${name}: is Deleted but not purged; its owner marker cannot be read, so it is left as is (multipass purge removes it)`);
    return;
  }
  // A Stopped instance is started by `multipass exec` to read the marker; a foreign one is stopped again.
  const marker = ownerOf(name);
  if (marker !== owner) {
    if (found.state === "Stopped") mp(["stop", name]);
    log(`${name}: owner marker is ${marker === undefined ? "missing" : JSON.stringify(marker)}, not this stack's: not this stack's instance, left as it was`);
    return;
  }
  const r = mp(["delete", "--purge", name]);
  if (r.status !== 0 && !/does not exist/.test(r.stderr)) throw new StepError(`multipass delete --purge ${name} failed (exit ${r.status}): ${tail(r.stderr, 5)}`);
  log(`${name}: deleted and purged`);
}

/** @type {Record<string, () => unknown>} */
const STEPS = { launch, delete: del };

if (require.main === module) runStepProgram(STEPS, { prefixFailures: true });

module.exports = { OWNER_FILE };
