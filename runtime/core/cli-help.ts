/**
 * The help texts of the `cohort` CLI (runtime/cli.ts): `cohort --help` (every command, the exit codes,
 * examples) and `cohort <command> --help` (usage, every flag, examples, exit codes). Plain text, lines of
 * at most about 100 columns, written to stdout with exit code 0.
 */

/** Exit codes shared by every command (`run` adds the signal codes). */
const EXIT_CODES = `Exit codes:
  0    success
  1    failure: the run failed, the ledger does not verify, the backend is unavailable, or the
       artifact directory cannot hold a run (the last stderr line says why)
  2    bad usage (unknown command or flag, missing argument) or a refused RunSpec
       (one \`spec error: <path>: <reason>\` line per problem)`;

const RUN_EXIT_CODES = `${EXIT_CODES}
  130  interrupted by SIGINT (128 + signal number; 143 SIGTERM, 129 SIGHUP): members were stopped
       and the ledger completed with outcome "interrupted"`;

/** The overview printed by `cohort --help`, `cohort -h` and `cohort help`. */
export const OVERVIEW_HELP = `usage: cohort <command> [flags]

cohort runs a cohort of member programs as a dependency graph (parallel start, readiness gate, hold,
teardown in reverse order) and records every step in a hash-chained ledger directory.

Commands:
  cohort run --spec FILE|- --artifacts DIR [flags]   run a cohort; one JSON summary line on stdout
  cohort ledger verify DIR|gs://…                   check a run's ledger (hash chain, digests, completion)
  cohort ledger delete gs://…                       delete an exported run's objects (completion.json first)
  cohort ledger list [--json] gs://BUCKET[/PREFIX]   list every object and run ledger under an address
  cohort ledger delete --all gs://BUCKET[/PREFIX]    delete every object under an address
  cohort ledger show DIR                            print each member's timeline and the critical path
  cohort ledger recover DIR                         cut a torn final record line left by a crash
  cohort ledger report DIR [--out FILE]             write a self-contained HTML report (DIR/report.html)
  cohort ledger junit DIR [--out FILE]              write the run as JUnit XML for CI (DIR/junit.xml)
  cohort reap DIR [--grace MS]                      stop anything a run left running
  cohort reap --artifacts ROOT                      the same for the run ROOT's run lock names
  cohort worker --temporal-address A --task-queue Q --backend-config FILE
                                                    run cohortRun workflows (docs/temporal.md; needs
                                                    dist/cohort-temporal.cjs and node_modules/@temporalio)
  cohort submit --temporal-address A --task-queue Q --workflow-id ID --artifacts DIR SPEC
                                                    start or attach to the run's workflow, print its summary
  cohort open-runs --temporal-address A --task-queue Q
                                                    list the task queue's running workflows (exit 3 if any)
  cohort version                                    print the runtime's version (also --version)
  cohort help [<command>]                           this text, or a command's help

Run \`cohort <command> --help\` (or \`cohort help <command>\`) for a command's flags and examples.

Examples:
  cohort run --spec cohort.yaml --artifacts ./artifacts
  cohort ledger verify artifacts/society-20261130T091502Z-3f9a1c
  cohort ledger show artifacts/society-20261130T091502Z-3f9a1c
  cohort ledger report artifacts/society-20261130T091502Z-3f9a1c --out /tmp/report.html

${RUN_EXIT_CODES}`;

/** Help of each command, keyed by the command words (`"ledger verify"`). */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  run: `usage: cohort run --spec FILE|- --artifacts DIR [--backend NAME] [--profile NAME] [--run-id ID]
                  [--backend-config FILE] [--backend-option KEY=VALUE]...
                  [--kubeconfig FILE] [--namespace NS] [--queue LOCALQUEUE] [--progress-fd N]
                  [--lock] [--watch-pid PID]... [--ledger-export gs://BUCKET[/PREFIX]]

Runs the cohort a RunSpec describes: admission, members started in dependency order (at most
\`concurrency\` at once), every member probed until ready, the ready roster held for \`hold\`, then
teardown in reverse dependency order. The ledger goes to DIR/<run id>/ (manifest.json,
records.ndjson, completion.json; members/<member>/output.log). Progress goes to stderr (a bar on a
terminal, else lines such as \`startup: started 12/200 ready 8/200\`); exactly one JSON line goes to
stdout once the run directory exists, after DIR/<run id>/report.html (the \`ledger report\` HTML) is
written on every outcome:
  {"runId","outcome","size","readyCount","timeToReadyMs","ledgerPath","reportPath","firstFailure"}
(reportPath is null when the report could not be written; that is noted on stderr and changes neither
the outcome nor the exit code). On failure the last stderr line is a one-line reason naming the member.

Flags:
  --spec FILE|-             the RunSpec (YAML or JSON; \`-\` reads it from stdin); required
  --artifacts DIR           the artifact root: the run directory DIR/<run id> is created in it (DIR is
                            created if missing); required
  --backend NAME            where members run: process (child processes of this runtime, each in its
                            own process group; the default), kubernetes (Pods) or systemd (transient
                            units on Multipass VMs; needs --backend-config, runtime/README.md)
  --profile NAME            the profile recorded in the ledger manifest (default: host)
  --run-id ID               the run id (a Kubernetes label value; default: <name>-<UTC time>-<6 hex>);
                            DIR/ID must not exist
  --backend-config FILE     backend options from a YAML mapping
  --backend-option KEY=VALUE
                            one backend option (repeatable; VALUE is parsed as JSON when it is valid
                            JSON); process: launcher=auto|native|perl|direct, execProbeTimeoutMs=<ms>,
                            cgroup=auto|v2|freezer|off (a cgroup per member; root), portOwner=check|off
  --kubeconfig FILE         kubernetes: the kubeconfig (its current context); default: in-cluster
  --namespace NS            kubernetes: the run namespace (must exist)
  --queue LOCALQUEUE        kubernetes: the Kueue LocalQueue that admits the roster as one gang
  --progress-fd N           write the progress lines to the open file descriptor N (>= 3) instead of
                            stderr, never as a bar: \`<phase>: started S/N ready R/N [<role> r/n, ...]
                            (ready: <members just ready>; waiting: <started, not ready>; queued:
                            <count, or names once at most 5 remain>)\` at most twice a second, the
                            hold's time left, every 10 s when quiet, and \`failed: <member>: <reason>\`;
                            stderr keeps the closing line. \`pulumi up\` shows these lines on the
                            CohortRun row this way
  --lock                    hold DIR/.cohort-run.lock for the run: refuse (naming the live run, its pid
                            and the reap command) while another live run holds it; reap the leftovers of
                            a run that died holding it first
  --watch-pid PID           end the run as interrupted (SIGHUP, exit 129) when process PID is gone or its
                            pid names another process (checked every 250 ms; repeatable); the host
                            profile watches its step script and the Pulumi command provider
  --ledger-export gs://BUCKET[/PREFIX]
                            after the run, upload manifest.json, records.ndjson and completion.json
                            (last) to gs://BUCKET/PREFIX/<run id>/ with Application Default Credentials
                            (STORAGE_EMULATOR_HOST=http://host:port: an emulator); the summary line then
                            has "ledgerUri"; a failed upload is one stderr line and exit 1; the key
                            ledgerExport of a --backend-config mapping does the same (the flag wins)
  -h, --help                this help

Examples:
  cohort run --spec cohort.yaml --artifacts ./artifacts
  node -e 'console.log(JSON.stringify({apiVersion:"cohort-lab/v1",kind:"Cohort",name:"demo",
    roles:[{name:"web",replicas:2,app:{command:["node","server.js"]}}]}))' |
    cohort run --spec - --artifacts /tmp/ledgers

${RUN_EXIT_CODES}`,

  ledger: `usage: cohort ledger verify|show|recover|report|junit DIR | ledger delete [--all] gs://… | ledger list gs://…

Commands on a run's ledger directory DIR (<artifacts>/<run id>):
  cohort ledger verify DIR    check it: manifest and spec digest, every record's seq, time and hash
                              chain, completion.json against the records; a finished run whose
                              completion.json is missing is refused
  cohort ledger show DIR      print each member's timeline (queued, started, ready, stopped) and the
                              critical path to roster-ready
  cohort ledger recover DIR   cut a torn final line (a crash in the middle of a write), keeping the cut
                              bytes beside it; any other damage is refused
  cohort ledger report DIR    write one self-contained HTML file (default DIR/report.html): identity,
                              outcome, phases, first failure, critical path, a Gantt of every member
  cohort ledger junit DIR     write JUnit XML (default DIR/junit.xml): a testcase per member, for CI
                              test reports
  cohort ledger delete gs://… delete a run's exported objects (completion.json first, then the rest);
                              --all: every object under gs://BUCKET[/PREFIX]
  cohort ledger list gs://…   list every object under gs://BUCKET[/PREFIX] and the run ledgers among them

Run \`cohort ledger <command> --help\` for one of them.

Examples:
  cohort ledger verify artifacts/society-20261130T091502Z-3f9a1c
  cohort ledger show artifacts/society-20261130T091502Z-3f9a1c

${EXIT_CODES}`,

  "ledger verify": `usage: cohort ledger verify [--json] DIR | gs://BUCKET/PREFIX/RUN_ID

Checks the ledger in DIR: manifest.json parses and its specSha256 matches the spec; records.ndjson
lines are JSON objects with seq 1, 2, 3, ... without gaps, RFC 3339 times and non-decreasing elapsedMs;
each record's prev is the SHA-256 of the line before (the first: of manifest.json); completion.json, if
present, matches the record count and both digests; all text is valid UTF-8. Without completion.json
the run crashed or is still running, which verifies, unless the records show it finished
(\`completion-missing\`). Prints \`ok: <run id>: <n> records, outcome <outcome>\`; on failure one line
\`cohort: ledger verify failed: ledger DIR: <code> [at line N]: <expected vs found>\` on stderr.
A gs:// address (a ledger \`run --ledger-export\` uploaded) is downloaded to a temporary directory and
checked the same way, more strictly: each of the three objects must exist (no completion.json: the
run is incomplete or its export torn) and records.ndjson must not be truncated; errors name the object.
With --json the success line is one JSON object instead: {"ledger","runId","records","outcome",
"firstFailure","completion"} (completion: the parsed completion.json, or null without one).

Flags:
  --json       print the result as one JSON line
  -h, --help   this help

Example:
  cohort ledger verify artifacts/society-20261130T091502Z-3f9a1c
  cohort ledger verify gs://my-ledgers/society-20261130T091502Z-3f9a1c

${EXIT_CODES}`,

  "ledger show": `usage: cohort ledger show DIR | gs://BUCKET/PREFIX/RUN_ID

Prints the run in DIR as text: its identity and outcome, each member's timeline (queued, started,
ready, stopping, stopped, failed) in ms from admission, and the critical path: the chain of members
whose readiness decided the time to roster-ready. A gs:// address is downloaded first (as verify).

Flags:
  -h, --help   this help

Example:
  cohort ledger show artifacts/society-20261130T091502Z-3f9a1c

${EXIT_CODES}`,

  "ledger recover": `usage: cohort ledger recover DIR

Repairs the one kind of damage a crash can leave: a torn final line in records.ndjson (no trailing
newline, or not JSON). The torn bytes are kept in records.ndjson.torn-<UTC time> beside it, the file is
cut at the last complete record and fsynced, and the ledger is verified again. A ledger that verifies
is left alone (\`ok: nothing to recover\`); any other damage is refused and nothing is changed. Do not
run it while the run's runtime is still alive.

Flags:
  -h, --help   this help

Example:
  cohort ledger recover artifacts/society-20261130T091502Z-3f9a1c

${EXIT_CODES}`,

  "ledger report": `usage: cohort ledger report DIR [--out FILE|-]

Writes one self-contained HTML file for the run in DIR (inline CSS and SVG; no script, nothing fetched):
the run id, profile, backend, outcome, size, ready count, time to ready, phases and tool versions; the
ledger's verification status; the first failure with its output tail; the critical path (as in \`ledger
show\`) against the time to ready; a Gantt chart of every member (queued, starting, ready, failed; the
critical path outlined; admission, roster-ready, hold and teardown markers); start-to-ready per role;
every member as a table. All ledger text is escaped. A run without completion.json (crashed or still
running) is rendered as far as its records go, and says so; a ledger that does not verify is rendered
with that error at the top. Prints \`wrote <file> (run <id>: <outcome>)\`.

Flags:
  --out FILE   where to write it (default DIR/report.html); \`-\` writes it to stdout
  -h, --help   this help

Example:
  cohort ledger report artifacts/society-20261130T091502Z-3f9a1c --out /tmp/report.html

${EXIT_CODES}`,

  "ledger junit": `usage: cohort ledger junit DIR [--out FILE|-]

Writes the run in DIR as JUnit XML, the schema Jenkins, GitLab and GitHub test reporters read: one
<testsuite> (name = run id; tests, failures, errors, skipped, time in seconds, timestamp in UTC) with
the run's facts as <properties>, and one <testcase> per member (classname = role, time = start to
ready in seconds). A member that failed has <failure message="<reason>"> with its output tail; a
member never started, or started but not ready when the run stopped, is <skipped>. A testcase \`run\`
is added when the run failed without a member, was interrupted (<failure>) or has no completion.json
(<error>); a testcase \`ledger\` when the ledger does not verify (<error>). Text is escaped and
characters XML 1.0 forbids (control characters) are removed. Exit 0 whatever the run's outcome: the
report carries it. Prints \`wrote <file> (run <id>: <outcome>)\`.

Flags:
  --out FILE   where to write it (default DIR/junit.xml); \`-\` writes it to stdout
  -h, --help   this help

Example:
  cohort ledger junit artifacts/society-20261130T091502Z-3f9a1c --out "$RUNNER_TEMP/cohort-junit.xml"

${EXIT_CODES}`,

  "ledger delete": `usage: cohort ledger delete gs://BUCKET/PREFIX/RUN_ID | ledger delete --all gs://BUCKET[/PREFIX]

Deletes the objects a run's \`run --ledger-export\` uploaded: completion.json FIRST (a delete cut short
leaves a ledger that reads as incomplete, never one that verifies with a part missing), then
records.ndjson and manifest.json. Objects already gone are skipped, so it can run twice. Prints
\`deleted N object(s) of gs://…\`; a failure is one line naming the object. A directory is refused
(remove a local run directory with rm). The gke profile's destroy runs it when keepLedgers is false.
With --all the address is a bucket or a prefix, and EVERY object under it is deleted (ledgers or not):
every completion.json first, then the rest. Prints \`deleted N object(s) under gs://…\`. The gke
profile's ledger guard runs it on destroy when deleteLedgers is true.

Flags:
  --all        every object under gs://BUCKET[/PREFIX], not one run's three
  -h, --help   this help

Examples:
  cohort ledger delete gs://my-ledgers/society-20261130T091502Z-3f9a1c
  cohort ledger delete --all gs://my-ledgers/old-runs

${EXIT_CODES}`,

  "ledger list": `usage: cohort ledger list [--json] gs://BUCKET[/PREFIX]

Lists every object under the address (a bucket, or a prefix taken as a directory: gs://b/p lists
p/…, never px…), one gs:// address a line, sorted; nothing when there is none. With --json one line
{"uri","objects","runs"}: objects as above, runs the run ids directly under the address
(<PREFIX>/<run id>/ holding a ledger file). A listing that fails (no such bucket, no credentials, the
store unreachable after the SDK's retries) is one stderr line and exit 1, never an empty listing.
The gke profile's ledger guard counts the bucket's objects with it before destroy.

Flags:
  --json       print the result as one JSON line
  -h, --help   this help

Example:
  cohort ledger list --json gs://my-ledgers

${EXIT_CODES}`,

  reap: `usage: cohort reap DIR [--grace MS] | cohort reap --artifacts ROOT [--grace MS]

Stops anything the run in DIR left running: its runtime process, every member process group found
through COHORT_RUN_ID=<run id> in /proc/<pid>/environ, and everything in the run's cgroups
(<hierarchy>/cohort/<run id>/<member>, which also holds what left its group and environment; the cgroups
are then removed). Process backend, this machine. Each gets SIGTERM, then SIGKILL after the grace period.
Idempotent: prints \`nothing left running for run <id>\` when there is nothing to stop. \`pulumi destroy\`
runs it for the host profile.
With --artifacts ROOT it reaps the run that ROOT/.cohort-run.lock names (\`cohort run --lock\`), alive or
not, and removes the lock once that run's runtime is gone.

Flags:
  --grace MS         SIGTERM to SIGKILL grace in milliseconds, 0 to 2147483647 (default 2000)
  --artifacts ROOT   reap the run the artifact root's run lock names
  -h, --help   this help

Example:
  cohort reap artifacts/society-20261130T091502Z-3f9a1c --grace 5000

${EXIT_CODES}`,
};

/** The short usage printed on stderr after a usage error: the command's usage lines and where the help is. */
export function shortUsage(command: string | undefined): string {
  const help = command !== undefined ? COMMAND_HELP[command] : undefined;
  if (help === undefined) return `${OVERVIEW_HELP.split("\n\n")[0]}\nRun \`cohort --help\` for the commands, their flags and exit codes.`;
  return `${help.split("\n\n")[0]}\nRun \`cohort ${command} --help\` for every flag, examples and exit codes.`;
}
