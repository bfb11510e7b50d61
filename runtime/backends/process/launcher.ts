/**
 * The launcher: a small process that starts members on the runtime's behalf. Two programs speak the same
 * protocol: the compiled `cohort-launcher` (runtime/launcher/main.go, built next to the bundle by
 * `npm run build`) and the perl script below (the fallback where the binary is absent).
 *
 * Why a launcher at all: fork(2) copies the page tables of every resident page of the forking process, and
 * libuv's spawn blocks the runtime's event loop until the child has exec'd, so spawning a wide level from
 * the runtime costs several times the CPU of a small process's fork, all serialized on the event loop. With
 * a launcher the runtime only writes one request line per member.
 *
 * Why the compiled one first: on a VM whose page tables are paravirtualized even perl's fork costs
 * milliseconds of wall time; the Go launcher starts members with clone(CLONE_VM|CLONE_VFORK), which copies
 * no page tables, from a pool of threads, several times faster. Figures: docs/host.md "Measured: the runtime
 * and the process backend".
 *
 * Protocol (one line per message, fields tab-separated, strings hex-encoded so no byte needs escaping):
 * - runtime -> launcher (stdin): `spawn <id> <dir> <argc> <arg>... <envc> <NAME=value>... [<cgroup kind> <cgroup dir>]`
 *   (kind `v2` or `freezer`, ./cgroup.ts: the child is in that cgroup before it execs; the perl child writes
 *   its own pid into `<dir>/cgroup.procs` right after the fork, the compiled one is created inside it)
 *   The runtime writes the requests of one event-loop turn as one write; the compiled launcher enlarges
 *   this pipe to 1 MiB (a level's requests fit in it at once: each carries the member's environment).
 * - launcher -> runtime (stdout): `ready`, `started <id> <pid>` (once the child has exec'd),
 *   `error <id> <message> <pid or 0>`, `exit <pid> <wait status>`
 * - Listen watches and lookups (the compiled launcher only, announced by the line `features watch lookup` before
 *   `ready`; runtime/launcher/listen.go): `watch <n> <host> <port>` -> `listening <n> <inode> [<error>]` once a
 *   LISTEN socket would accept a TCP connection to host:port (the launcher asks the kernel every 10 ms through
 *   sock_diag exact lookups, O(1) each), `unwatch <n>` (no answer), `lookup <n> <host> <port>` -> `listener <n>
 *   <inode> <uid> [<error>]` (inode 0: none). `<n>` is a decimal token of this class; `<host>` an IP address
 *   literal (hex-encoded); `<error>` (hex-encoded) comes with inode 0 when the kernel could not be asked. See
 *   {@link Launcher.watchListening} and {@link Launcher.lookupListener}.
 * The launcher never waits for a child's exec: each fork returns to the loop at once, and the child's
 * close-on-exec status pipe (EOF = exec'd, bytes = the reason it could not) is read by the same select
 * loop, so forks are not serialized behind children waiting to be scheduled.
 * The child: setsid() (its own session and process group: pgid = pid), stdin from /dev/null, stdout and
 * stderr connected to the runtime's unix socket (each connection starts with the line `<id> <fd>`),
 * signal dispositions reset, chdir to its directory, exec with exactly the given environment. Exec
 * failures come back through a close-on-exec pipe as `error` (so a missing command is a start error,
 * as with a direct spawn). When the runtime goes away (EOF on stdin, even after a SIGKILL of the
 * runtime), the launcher SIGKILLs every member process group it started, then kills every member cgroup it
 * spawned into (what left its group: v2 `cgroup.kill`, v1 freezer freeze/kill/thaw, ./cgroup.ts) and exits:
 * no orphans.
 * Needs perl 5 with POSIX and IO::Socket::UNIX (Debian/Ubuntu `perl-base`, macOS).
 */
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { constants as osConstants } from "node:os";
import type { ResultPromise } from "execa";
import { lastUnits } from "../../core/text";
import { loadExeca } from "./start";

/** The perl launcher program (the fallback when the compiled launcher is absent). */
export const LAUNCHER_SCRIPT = String.raw`
use strict; use warnings;
use POSIX qw(setsid _exit dup2 WNOHANG);
use IO::Socket::UNIX; use IO::Select;
my $sock = $ARGV[0];
$| = 1;
$SIG{PIPE} = 'IGNORE'; $SIG{INT} = 'IGNORE'; $SIG{TERM} = 'IGNORE'; $SIG{HUP} = 'IGNORE';
pipe(my $wake_r, my $wake_w) or die "pipe: $!";
$wake_w->autoflush(1);
my %groups;    # pid => 1 for every member started and not known to have failed
my %cgroups;   # member cgroup directory => kind (v2, freezer), killed when the runtime is gone
my %inflight;  # fileno of an exec-status pipe => [pipe, id, pid, bytes read]
my $sel = IO::Select->new(\*STDIN, $wake_r);
$SIG{CHLD} = sub { syswrite($wake_w, "x") };
sub hex2s { pack('H*', $_[0]) }
sub s2hex { unpack('H*', $_[0]) }
sub reap {
  while ((my $pid = waitpid(-1, WNOHANG)) > 0) { delete $groups{$pid} if !kill(0, -$pid); print "exit	$pid	$?
"; }
}
sub spawn_member {
  my @f = @_;
  my $id = hex2s(shift @f); my $dir = hex2s(shift @f);
  my $argc = shift @f; my @argv = map { hex2s($_) } splice(@f, 0, $argc);
  my $envc = shift @f; my @env = map { hex2s($_) } splice(@f, 0, $envc);
  my $cgroup = @f >= 2 ? hex2s($f[1]) : '';
  $cgroups{$cgroup} = $f[0] if $cgroup ne '';
  my ($err_r, $err_w);
  if (!pipe($err_r, $err_w)) { print "error	" . s2hex($id) . "	" . s2hex("pipe: $!") . "	0
"; return; }
  my $pid = fork();
  if (!defined $pid) { close $err_r; close $err_w; print "error	" . s2hex($id) . "	" . s2hex("fork: $!") . "	0
"; return; }
  if ($pid == 0) {
    my $fail = sub { syswrite($err_w, $_[0]); _exit(127); };
    if ($cgroup ne '') {
      open(my $cg, '>', "$cgroup/cgroup.procs") or $fail->("cannot enter cgroup $cgroup: $!");
      (syswrite($cg, "$$") && close($cg)) or $fail->("cannot enter cgroup $cgroup: $!");
    }
    setsid() or $fail->("setsid: $!");
    $SIG{$_} = 'DEFAULT' for qw(PIPE INT TERM HUP CHLD);
    open(STDIN, '<', '/dev/null') or $fail->("stdin: $!");
    for my $fd (1, 2) {
      my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $sock) or $fail->("connect to the runtime: $!");
      syswrite($s, "$id $fd\n");
      dup2(fileno($s), $fd) or $fail->("dup2: $!");
      close $s;
    }
    chdir($dir) or $fail->("chdir $dir: $!");
    %ENV = ();
    for my $kv (@env) { my $eq = index($kv, '='); $ENV{substr($kv, 0, $eq)} = substr($kv, $eq + 1); }
    { no warnings 'exec'; exec { $argv[0] } @argv; }
    my $errno = $! + 0; my $msg = "$!";
    $fail->($errno == POSIX::ENOENT() ? "command not found (ENOENT)" : $errno == POSIX::EACCES() ? "permission denied (EACCES)" : $msg);
  }
  # Do not wait for the exec here: the pipe closes (close-on-exec) when it succeeds, or carries the
  # reason when it fails; the main loop reports either, so forks never wait on a child being scheduled.
  close $err_w;
  $groups{$pid} = 1;
  $inflight{fileno($err_r)} = [$err_r, $id, $pid, ''];
  $sel->add($err_r);
}
sub exec_status {
  my ($fh) = @_;
  my $e = $inflight{fileno($fh)};
  my $n = sysread($fh, my $part, 4096);
  if (!defined $n) { return if $!{EINTR}; $n = 0; }
  if ($n > 0) { $e->[3] .= $part; return; }
  $sel->remove($fh); delete $inflight{fileno($fh)}; close $fh;
  if ($e->[3] eq '') { print "started	" . s2hex($e->[1]) . "	$e->[2]
"; return; }
  delete $groups{$e->[2]};
  print "error	" . s2hex($e->[1]) . "	" . s2hex($e->[3]) . "	$e->[2]
";
}
sub kill_cgroup {
  my ($dir, $kind) = @_;
  my $w = sub { open(my $fh, '>', $_[0]) or return 0; syswrite($fh, $_[1]); close($fh); };
  if ($kind eq 'v2') { $w->("$dir/cgroup.kill", "1"); return; }
  $w->("$dir/freezer.state", "FROZEN") or return;
  for (1 .. 100) { open(my $s, '<', "$dir/freezer.state") or last; my $v = <$s>; close $s; last if !defined $v || $v =~ /^FROZEN/; select(undef, undef, undef, 0.01); }
  if (open(my $p, '<', "$dir/cgroup.procs")) { while (my $pid = <$p>) { chomp $pid; kill('KILL', $pid) if $pid =~ /^\d+$/ && $pid != $$; } close $p; }
  $w->("$dir/freezer.state", "THAWED");
}
my $buf = '';
print "ready
";
while (1) {
  my @ready = $sel->can_read();
  reap();
  for my $fh (@ready) {
    if ($fh == $wake_r) { sysread($wake_r, my $x, 4096); next; }
    if ($fh != \*STDIN && exists $inflight{fileno($fh)}) { exec_status($fh); next; }
    my $n = sysread(STDIN, my $chunk, 65536);
    next if !defined($n) && $!{EINTR};
    if (!$n) { kill('KILL', -$_) for keys %groups; kill_cgroup($_, $cgroups{$_}) for keys %cgroups; exit 0; }
    $buf .= $chunk;
    while ((my $nl = index($buf, "\n")) >= 0) {
      my $line = substr($buf, 0, $nl); $buf = substr($buf, $nl + 1);
      my @f = split /\t/, $line, -1;
      my $cmd = shift @f;
      spawn_member(@f) if defined $cmd && $cmd eq 'spawn';
    }
  }
}
`;

/** A request to start one member. */
export interface LaunchRequest {
  readonly id: string;
  readonly dir: string;
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The member's cgroup (./cgroup.ts), entered before exec; absent: none. */
  readonly cgroup?: { readonly kind: "v2" | "freezer"; readonly dir: string };
}

/** How a member's leader ended (from its wait status). */
export interface LaunchExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const hex = (text: string): string => Buffer.from(text, "utf8").toString("hex");

/** A {@link LaunchRequest} as its protocol line (with the newline), ready to be written. */
export interface EncodedLaunchRequest {
  readonly id: string;
  readonly line: string;
}

/** Encodes a request as its `spawn` line (see the protocol in the module doc). */
export function encodeLaunchRequest(request: LaunchRequest): EncodedLaunchRequest {
  const fields = [
    "spawn",
    hex(request.id),
    hex(request.dir),
    String(request.argv.length),
    ...request.argv.map(hex),
    String(Object.keys(request.env).length),
    ...Object.entries(request.env).map(([name, value]) => hex(`${name}=${value}`)),
    ...(request.cgroup !== undefined ? [request.cgroup.kind, hex(request.cgroup.dir)] : []),
  ];
  return { id: request.id, line: `${fields.join("\t")}\n` };
}
const unhex = (text: string): string => Buffer.from(text, "hex").toString("utf8");

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(Object.entries(osConstants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

/** Decodes a wait(2) status into an exit code or a signal name. */
export function decodeWaitStatus(status: number): LaunchExit {
  const signal = status & 0x7f;
  if (signal === 0) return { code: (status >> 8) & 0xff, signal: null };
  return { code: null, signal: SIGNAL_NAMES.get(signal) ?? (`SIG${signal}` as NodeJS.Signals) };
}

/**
 * The launcher program: the perl script above, or the compiled launcher (runtime/launcher/main.go, built by
 * `npm run toolchain`), which speaks the same protocol but starts members with clone(CLONE_VM|CLONE_VFORK)
 * instead of fork(2), from a pool of threads. `path` is the absolute path of the `cohort-launcher` binary.
 */
export type LauncherProgram = { readonly kind: "perl" } | { readonly kind: "native"; readonly path: string };

/** Env var naming the compiled launcher binary (set by `scripts/run.ts` from the toolchain cache). */
export const NATIVE_LAUNCHER_ENV = "COHORT_LAUNCHER";

/** File name of the compiled launcher next to the runtime bundle (`npm run build` writes `dist/cohort-launcher`). */
export const NATIVE_LAUNCHER_NAME = "cohort-launcher";

/**
 * Finds the compiled launcher: `$COHORT_LAUNCHER` when set (it must then be an executable file), else, next to
 * the file this code runs from (the runtime bundle), `<stem>-launcher` (the host profile's content-addressed
 * copies: `cohort-<sha>.cjs` next to `cohort-<sha>-launcher`) or `cohort-launcher` (`dist/`), else null.
 *
 * @param moduleFile - the running file. @default this module's `__filename` (the bundle, once bundled)
 * @returns the absolute path, or null when there is none
 * @throws {Error} when COHORT_LAUNCHER is set but does not name an executable file
 */
export function findNativeLauncher(env: NodeJS.ProcessEnv = process.env, moduleFile: string = __filename): string | null {
  const named = env[NATIVE_LAUNCHER_ENV];
  if (named !== undefined && named !== "") {
    if (!isExecutableFile(named)) throw new Error(`${NATIVE_LAUNCHER_ENV}=${named} is not an executable file`);
    return path.resolve(named);
  }
  for (const candidate of [launcherBeside(moduleFile), path.join(path.dirname(moduleFile), NATIVE_LAUNCHER_NAME)]) {
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}

/**
 * Where a copy of the launcher belongs beside a copy of the bundle: `<bundle path without its extension>-launcher`
 * (`cohort-<sha>.cjs` -> `cohort-<sha>-launcher`); the first place {@link findNativeLauncher} looks.
 */
export function launcherBeside(bundleFile: string): string {
  return path.join(path.dirname(bundleFile), `${path.basename(bundleFile).replace(/\.[cm]?[jt]s$/, "")}-launcher`);
}

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The listen backlog of the output socket. The launcher connects each member's stdout and stderr BEFORE it
 * forks the member, with a blocking connect(2), and the runtime accepts them when its event loop comes round;
 * with Node's default backlog (511) a level of 256 members or more filled the queue while the runtime was busy
 * starting that level, and every further spawn waited in connect() for the runtime's accepts (400 members at
 * once: the last spawned after 1.0 s against 0.4 s for the launcher alone). The kernel caps the value at
 * net.core.somaxconn (4096 since Linux 5.4; 128 before, where 64 members can wait for an accept).
 */
const OUTPUT_BACKLOG = 65_535;

/** How long a launcher may take to answer `ready`, in ms (it answers in a few ms; a stuck one must not hang the run). */
const BOOT_TIMEOUT_MS = 10_000;

/** The prefix of a launcher's socket directory under the OS temp dir (`cohort-l-XXXXXX`, made by mkdtemp). */
export const LAUNCHER_DIR_PREFIX = "cohort-l-";
/**
 * The file in a launcher's socket directory that names its owner, written before the socket is bound:
 * `<hostname>\n<runtime pid>\n`. {@link sweepStaleLauncherDirs} removes only directories whose host is this one.
 */
export const LAUNCHER_OWNER_FILE = "owner";
/**
 * A socket directory changed less than this long ago (ms) is never swept: binding its socket touches it, and
 * between bind(2) and listen(2) a live launcher's socket refuses connections.
 */
const SOCKET_DIR_GRACE_MS = 60_000;

/**
 * Removes the socket directories of launchers that are gone: a runtime that exits without closing its
 * launcher (SIGKILL, a crash, the forced exit after a third signal) leaves its directory behind. Linux only.
 * A directory in `tmpDir` named `cohort-l-*` is removed only when all of these hold:
 * - it is a real directory (not a symlink) owned by this user, unchanged for over a minute;
 * - its `owner` file ({@link LAUNCHER_OWNER_FILE}) names this host (a temp dir shared between machines, e.g.
 *   over NFS, holds sockets of other kernels, which refuse connections from this one);
 * - its socket `s` is absent (the launcher never listened), or is a socket that refuses a connection
 *   (ECONNREFUSED from connect(2) on Linux: nothing listens on it any more, in whatever pid namespace).
 * Anything else stays: a directory from before the owner file, another host's, a socket that accepts (the
 * connection is closed at once; the runtime closes its end at EOF without reading a header), EAGAIN from a
 * full backlog, EACCES, an `s` that is not a socket. A leaked directory costs less than a live run's socket.
 * Best effort, never throws: called without waiting when a launcher starts.
 *
 * @param tmpDir - @default os.tmpdir()
 * @param now - ms since the epoch, for the age check; @default Date.now()
 * @returns the directories removed
 */
export async function sweepStaleLauncherDirs(tmpDir: string = os.tmpdir(), now: number = Date.now()): Promise<string[]> {
  if (process.platform !== "linux") return []; // elsewhere (XNU) a full listen queue also answers ECONNREFUSED
  let names: string[];
  try {
    names = (await fs.promises.readdir(tmpDir)).filter((name) => name.startsWith(LAUNCHER_DIR_PREFIX));
  } catch {
    return [];
  }
  const uid = process.getuid?.();
  const host = os.hostname();
  const removed: string[] = [];
  for (const name of names) {
    const dir = path.join(tmpDir, name);
    try {
      const stat = await fs.promises.lstat(dir);
      if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid) || now - stat.mtimeMs <= SOCKET_DIR_GRACE_MS) continue;
      const owner = path.join(dir, LAUNCHER_OWNER_FILE);
      if (!(await fs.promises.lstat(owner)).isFile() || (await fs.promises.readFile(owner, "utf8")).split("\n")[0] !== host) continue;
      const socket = path.join(dir, "s");
      const socketStat = await fs.promises.lstat(socket).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return null;
        throw error;
      });
      if (socketStat !== null && !(socketStat.isSocket() && (await connectError(socket)) === "ECONNREFUSED")) continue;
      await fs.promises.rm(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // gone meanwhile, no owner file, or not ours to remove
    }
  }
  return removed;
}

/** The errno code of a connection to unix socket `file`, or null when it was accepted (then closed at once). */
function connectError(file: string): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = net.connect({ path: file });
    socket.once("connect", () => {
      socket.destroy();
      resolve(null);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "EUNKNOWN"));
  });
}

/** Whether perl with the modules the launcher needs is on PATH. */
export async function launcherAvailable(): Promise<boolean> {
  const { execa } = await loadExeca();
  const result = await execa("perl", ["-MPOSIX", "-MIO::Socket::UNIX", "-MIO::Select", "-e", "1"], { reject: false, stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  return result.exitCode === 0;
}

/**
 * One launcher process per process backend instance.
 */
export class Launcher {
  /** Connections carrying member output: `(member, fd, socket, first bytes after the header)`. */
  onOutput: (member: string, fd: number, socket: net.Socket, rest: Buffer) => void = (_member, _fd, socket) => socket.destroy();
  /** Leader exits: `(pid, exit)`. */
  onExit: (pid: number, exit: LaunchExit) => void = () => undefined;
  /** A child whose exec failed (its `exit` line, if already sent, can be dropped): `(pid)`. */
  onFailedPid: (pid: number) => void = () => undefined;
  /** The launcher process ended before {@link close} (it crashed or was killed): `(reason)`. */
  onDied: (reason: string) => void = () => undefined;
  /**
   * What the launcher announced it can do besides spawning (its `features` line before `ready`): `watch` and
   * `lookup` (the compiled launcher where sock_diag exact lookups work); empty for the perl launcher and for
   * compiled launchers from before the line existed.
   */
  readonly features = new Set<string>();

  private readonly pending = new Map<string, { resolve: (pid: number) => void; reject: (error: Error) => void }>();
  /** Listen watches and lookups not answered yet, by token (see {@link watchListening}, {@link lookupListener}). */
  private readonly asked = new Map<string, { readonly kind: "listening" | "listener"; resolve: (fields: readonly string[]) => void; reject: (error: Error) => void }>();
  private nextToken = 1;
  /** Request lines not written yet (see {@link queueLine}). */
  private readonly outgoing: string[] = [];
  private stdoutBuffer = "";
  private stderrTail = "";
  private closed = false;
  private readonly exited: Promise<void>;

  private constructor(
    /** Which launcher program runs: `perl` or `native`. */
    readonly kind: LauncherProgram["kind"],
    private readonly process: ResultPromise,
    private readonly server: net.Server,
    private readonly socketDir: string,
  ) {
    this.exited = new Promise((resolve) => {
      process.nodeChildProcess.once("exit", () => resolve());
    });
  }

  /**
   * Starts the launcher and its unix socket (in a private 0700 directory under the OS temp dir, so the
   * path stays short and no other user can connect; with an `owner` file naming this host and pid). First
   * sweeps, without waiting, the directories of launchers that are gone ({@link sweepStaleLauncherDirs}).
   *
   * @throws {Error} when perl cannot be started or does not answer `ready`
   */
  static async start(program: LauncherProgram = { kind: "perl" }): Promise<Launcher> {
    void sweepStaleLauncherDirs().catch(() => undefined);
    const socketDir = fs.mkdtempSync(path.join(os.tmpdir(), LAUNCHER_DIR_PREFIX));
    fs.chmodSync(socketDir, 0o700);
    fs.writeFileSync(path.join(socketDir, LAUNCHER_OWNER_FILE), `${os.hostname()}\n${process.pid}\n`);
    const socketPath = path.join(socketDir, "s");
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ path: socketPath, backlog: OUTPUT_BACKLOG }, () => resolve());
    });
    server.unref();
    const { execa } = await loadExeca();
    const [file, ...args] = program.kind === "perl" ? ["perl", "-e", LAUNCHER_SCRIPT, socketPath] : [program.path, socketPath];
    const child = execa(file!, args, {
      detached: true, // its own process group: a Ctrl-C to the runtime's terminal does not reach it
      cleanup: false,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      buffer: false,
      reject: false,
      extendEnv: false,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    child.catch(() => undefined);
    const launcher = new Launcher(program.kind, child, server, socketDir);
    server.on("connection", (socket) => launcher.accept(socket));
    try {
      await launcher.boot();
    } catch (error) {
      launcher.closed = true;
      child.kill("SIGKILL");
      server.close();
      fs.rmSync(socketDir, { recursive: true, force: true });
      const where = program.kind === "native" ? ` ${program.path}` : "";
      throw new Error(`the ${program.kind} launcher${where} did not start: ${(error as Error).message}`, { cause: error });
    }
    return launcher;
  }

  private boot(): Promise<void> {
    const child = this.process;
    return new Promise<void>((resolve, reject) => {
      let booted = false;
      const timer = setTimeout(() => reject(new Error(`no \`ready\` line within ${BOOT_TIMEOUT_MS} ms`)), BOOT_TIMEOUT_MS);
      timer.unref();
      child.stdout!.setEncoding("utf8");
      child.stdout!.on("data", (chunk: string) => {
        this.stdoutBuffer += chunk;
        let newline = this.stdoutBuffer.indexOf("\n");
        while (newline !== -1) {
          const line = this.stdoutBuffer.slice(0, newline);
          this.stdoutBuffer = this.stdoutBuffer.slice(newline + 1);
          if (line.startsWith("features\t") && !booted) {
            for (const feature of line.split("\t").slice(1)) this.features.add(feature);
          } else if (line === "ready" && !booted) {
            booted = true;
            clearTimeout(timer);
            resolve();
          } else {
            this.message(line);
          }
          newline = this.stdoutBuffer.indexOf("\n");
        }
      });
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (chunk: string) => (this.stderrTail = lastUnits(this.stderrTail + chunk, 2000)));
      child.stdin!.on("error", () => undefined); // EPIPE after the launcher died: reported through "exit" below
      child.nodeChildProcess.once("exit", (code, signal) => {
        const why = `the launcher (${this.kind}) exited (${signal ?? `exit code ${code}`})${this.stderrTail ? `: ${this.stderrTail.trim()}` : ""}`;
        if (!booted) reject(new Error(why));
        for (const [, waiter] of this.pending) waiter.reject(new Error(why));
        this.pending.clear();
        this.dropAsked(why);
        if (!this.closed) {
          this.closed = true;
          this.onDied(why);
        }
      });
      child.nodeChildProcess.once("error", (error) => reject(error));
    });
  }

  private message(line: string): void {
    const [kind, a, b, c] = line.split("\t");
    if (kind === "started" || kind === "error") {
      const id = unhex(a ?? "");
      const waiter = this.pending.get(id);
      this.pending.delete(id);
      if (kind === "started") waiter?.resolve(Number(b));
      else {
        waiter?.reject(new Error(unhex(b ?? "")));
        if (Number(c) > 0) this.onFailedPid(Number(c));
      }
    } else if (kind === "exit") {
      this.onExit(Number(a), decodeWaitStatus(Number(b)));
    } else if (kind === "listening" || kind === "listener") {
      const waiter = this.asked.get(a ?? "");
      if (waiter?.kind !== kind) return;
      this.asked.delete(a!);
      waiter.resolve(line.split("\t").slice(2));
    }
  }

  /** Rejects every watch and lookup not answered yet (the launcher exited or was closed). */
  private dropAsked(why: string): void {
    const waiters = [...this.asked.values()];
    this.asked.clear();
    for (const waiter of waiters) waiter.reject(new Error(why));
  }

  /**
   * Sends a `watch` or `lookup` and resolves with the answer's fields after the token (see the module doc).
   *
   * @throws {Error} when the launcher lacks the feature, is closed or exits first, or `signal` aborts (a watch
   *   is then cancelled with `unwatch`)
   */
  private ask(feature: "watch" | "lookup", host: string, port: number, signal?: AbortSignal): Promise<readonly string[]> {
    if (!this.features.has(feature)) return Promise.reject(new Error(`the ${this.kind} launcher cannot ${feature} listeners`));
    if (this.closed) return Promise.reject(new Error("the launcher is closed"));
    if (signal?.aborted) return Promise.reject(new Error(`${feature} aborted`));
    const token = String(this.nextToken++);
    return new Promise<readonly string[]>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.asked.delete(token)) return;
        if (feature === "watch" && !this.closed) this.queueLine(`unwatch\t${token}\n`);
        reject(new Error(`${feature} aborted`));
      };
      const settle = (): void => signal?.removeEventListener("abort", onAbort);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.asked.set(token, {
        kind: feature === "watch" ? "listening" : "listener",
        resolve: (fields) => {
          settle();
          resolve(fields);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
      this.queueLine(`${feature}\t${token}\t${hex(host)}\t${port}\n`);
    });
  }

  /**
   * Resolves once a LISTEN socket would accept a TCP connection to `host`:`port` (the launcher looks every 10 ms
   * with a sock_diag exact lookup: runtime/launcher/listen.go), with that socket's inode (as in /proc/net/tcp and
   * `/proc/<pid>/fd`). It says only that something listens there, not whose it is, nor that it answers.
   *
   * @param host - an IP address literal (`127.0.0.1`, `::1`); an IPv4 address also finds a dual-stack `[::]` listener
   * @throws {Error} when the launcher cannot watch (not announced: the perl launcher, an older compiled one), the
   *   lookup fails (e.g. `sock_diag: ...`, a host that is not an address literal), the launcher exits or is
   *   closed first, or `signal` aborts (the watch is cancelled)
   */
  async watchListening(host: string, port: number, signal?: AbortSignal): Promise<number> {
    const [inode, error] = await this.ask("watch", host, port, signal);
    if (error !== undefined || !(Number(inode) > 0)) throw new Error(error !== undefined ? unhex(error) : `bad watch answer: ${inode}`);
    return Number(inode);
  }

  /**
   * The LISTEN socket that would accept a TCP connection to `host`:`port` now (one sock_diag exact lookup by the
   * launcher, O(1): runtime/launcher/listen.go): its inode and owner uid, or null when none would.
   *
   * @param host - an IP address literal, as for {@link watchListening}
   * @throws {Error} when the launcher cannot look up (not announced), the lookup fails, or the launcher exits or is
   *   closed first
   */
  async lookupListener(host: string, port: number): Promise<{ readonly inode: number; readonly uid: number } | null> {
    const [inode, uid, error] = await this.ask("lookup", host, port);
    if (error !== undefined) throw new Error(unhex(error));
    return Number(inode) > 0 ? { inode: Number(inode), uid: Number(uid) } : null;
  }

  private accept(socket: net.Socket): void {
    let header = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      header = Buffer.concat([header, chunk]);
      const newline = header.indexOf(10);
      if (newline === -1) {
        if (header.length > 512) socket.destroy();
        return;
      }
      socket.off("data", onData);
      socket.pause();
      const [member, fd] = header.subarray(0, newline).toString("utf8").split(" ");
      this.onOutput(member ?? "", Number(fd), socket, header.subarray(newline + 1));
    };
    socket.on("data", onData);
    socket.on("error", () => undefined);
  }

  /**
   * Starts a member.
   *
   * @param request - the request, or its line from {@link encodeLaunchRequest} (made ahead of time: the
   *   process backend encodes every member's line at admission, so a wide level's starts do no encoding)
   * @returns its pid (= pgid)
   * @throws {Error} with the reason when it could not be started (e.g. `command not found (ENOENT)`)
   */
  spawn(request: LaunchRequest | EncodedLaunchRequest): Promise<number> {
    if (this.closed) return Promise.reject(new Error("the launcher is closed"));
    const { id, line } = "line" in request ? request : encodeLaunchRequest(request);
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.queueLine(line);
    });
  }

  /**
   * Writes request lines in batches: the lines of every spawn asked for in one turn of the event loop (a
   * level's members, started together) go out in one write after the current microtasks, instead of one
   * write(2) and one write request each.
   */
  private queueLine(line: string): void {
    this.outgoing.push(line);
    if (this.outgoing.length > 1) return;
    process.nextTick(() => {
      const batch = this.outgoing.splice(0).join("");
      if (!this.closed && batch !== "") this.process.stdin!.write(batch);
    });
  }

  /** The launcher process's pid (undefined once it could not be spawned). */
  get pid(): number | undefined {
    return this.process.nodeChildProcess.pid;
  }

  /** Ends the launcher (it SIGKILLs any member group it still knows) and removes its socket. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.dropAsked("the launcher is closed");
    const queued = this.outgoing.splice(0).join("");
    this.process.stdin!.end(queued === "" ? undefined : queued);
    await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    this.server.close();
    fs.rmSync(this.socketDir, { recursive: true, force: true });
  }
}
