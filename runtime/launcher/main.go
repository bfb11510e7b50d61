// Command cohort-launcher starts cohort members on behalf of the cohort runtime's process backend.
//
// It speaks the same line protocol as the perl launcher (runtime/backends/process/launcher.ts):
//
//	runtime -> launcher (stdin):  spawn <id> <dir> <argc> <arg>... <envc> <NAME=value>... [<cgroup kind> <cgroup dir>]
//	launcher -> runtime (stdout): ready | started <id> <pid> | error <id> <message> <pid or 0> | exit <pid> <wait status>
//
// Fields are tab-separated; strings are hex-encoded. Usage: cohort-launcher <unix socket path>, or
// cohort-launcher -version.
//
// This launcher also answers, where the kernel's sock_diag exact lookups work (listen.go; the perl launcher
// does neither, and older compiled ones neither), which it announces with the line `features watch lookup`
// right before `ready` (a runtime that does not know the line ignores it):
//
//	watch <id> <host> <port>    -> listening <id> <inode> [<error>]
//	unwatch <id>                   (no answer)
//	lookup <tag> <host> <port>  -> listener <tag> <inode> <uid> [<error>]
//
// <id> and <tag> are tokens chosen by the runtime (no tab), echoed back; <host> is an IP address literal
// (hex-encoded text, e.g. "127.0.0.1", "::1"); <port> decimal. A watch looks every 10 ms for the LISTEN socket that
// would accept a TCP connection to host:port and answers once: with its inode when one appears, or with inode
// 0 and the error (hex-encoded) when the lookup fails for another reason than "none" (bad address, a sock_diag
// error): the runtime then falls back to its own schedule. `unwatch` ends a watch not answered yet. A lookup
// answers at once: the inode and owner uid of that LISTEN socket, 0 0 when none, or 0 0 and the error.
//
// Why a compiled launcher: on virtual machines whose page tables are paravirtualized (Firecracker with PVM,
// the 2-core machine this project is developed on), fork(2) costs milliseconds because every page-table
// entry of the parent is copied through the hypervisor. Go's os/exec path uses clone(CLONE_VM|CLONE_VFORK)
// (src/syscall/exec_linux.go), which copies no page tables, and ForkExec calls may run concurrently
// (acquireForkLock in src/syscall/exec_unix.go). Figures: docs/host.md "Measured: the runtime and the
// process backend".
//
// Each member: its own session and process group (setsid, pgid = pid), stdin /dev/null, stdout and stderr
// connected to the runtime's unix socket (each connection starts with the line "<id> <fd>"), chdir to its
// directory, exec with exactly the given environment (the program is looked up in the member's PATH when it
// has no slash). Spawns run on a small pool of goroutines, so one slow exec does not hold up the others.
// When stdin reaches EOF (the runtime is gone, even after a SIGKILL), every member process group started
// and not known to have failed gets SIGKILL, then every member cgroup spawned into is killed (what left its
// group), and the launcher exits 0: no orphans.
//
// Cgroups (runtime/backends/process/cgroup.ts): a request may end with a cgroup kind ("v2" or "freezer") and
// directory; the child is then created INSIDE that cgroup, so it never runs a single instruction outside it
// and no fork of it can escape. v2: clone3(CLONE_INTO_CGROUP) with a descriptor of the directory
// (SysProcAttr.UseCgroupFD; https://docs.kernel.org/admin-guide/cgroup-v2.html, clone3(2)). cgroup v1 has no
// such flag, but a v1 cgroup holds threads (its "tasks" file) and a child starts in its parent THREAD's cgroups
// (https://docs.kernel.org/admin-guide/cgroup-v1/cgroups.html, 1.4 "fork"): the spawn runs on a fresh OS
// thread locked to its goroutine, which writes its own thread id into <dir>/tasks and then forks; the goroutine
// returns without unlocking, so Go terminates that thread and the launcher itself never stays in the cgroup.
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// version is stamped by the toolchain build (-X main.version=...).
var version = "dev"

type request struct {
	id, dir string
	argv    []string
	env     []string
	// cgroupKind is "", "v2" or "freezer"; cgroupDir the member's cgroup directory.
	cgroupKind, cgroupDir string
}

type launcher struct {
	socket  string
	devnull *os.File

	outMu sync.Mutex
	out   *bufio.Writer

	groupsMu sync.Mutex
	groups   map[int]bool
	closing  bool
	// cgroups maps each member cgroup directory spawned into to its kind ("v2" or "freezer").
	cgroups map[string]string
}

func (l *launcher) send(fields ...string) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.out.WriteString(strings.Join(fields, "\t"))
	l.out.WriteByte('\n')
	l.out.Flush()
}

func hexs(s string) string { return hex.EncodeToString([]byte(s)) }

func unhex(s string) (string, error) {
	b, err := hex.DecodeString(s)
	return string(b), err
}

// parse decodes the fields after "spawn".
func parse(f []string) (request, error) {
	var r request
	next := func() (string, error) {
		if len(f) == 0 {
			return "", errors.New("truncated spawn request")
		}
		v := f[0]
		f = f[1:]
		return v, nil
	}
	strs := func() ([]string, error) {
		c, err := next()
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > len(f) {
			return nil, fmt.Errorf("bad count %q", c)
		}
		out := make([]string, n)
		for i := range out {
			if out[i], err = unhex(f[i]); err != nil {
				return nil, err
			}
		}
		f = f[n:]
		return out, nil
	}
	var err error
	var raw string
	if raw, err = next(); err == nil {
		r.id, err = unhex(raw)
	}
	if err == nil {
		if raw, err = next(); err == nil {
			r.dir, err = unhex(raw)
		}
	}
	if err == nil {
		r.argv, err = strs()
	}
	if err == nil {
		r.env, err = strs()
	}
	if err == nil && len(r.argv) == 0 {
		err = errors.New("empty argv")
	}
	if err == nil && len(f) > 0 {
		r.cgroupKind = f[0]
		if r.cgroupKind != "v2" && r.cgroupKind != "freezer" {
			err = fmt.Errorf("bad cgroup kind %q", r.cgroupKind)
		} else if raw, err = next(); err == nil {
			if raw, err = next(); err == nil {
				r.cgroupDir, err = unhex(raw)
			}
		}
	}
	return r, err
}

// connect opens one blocking stream connection to the runtime's socket and writes its header line.
func (l *launcher) connect(id string, fd int) (*os.File, error) {
	s, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Connect(s, &syscall.SockaddrUnix{Name: l.socket}); err != nil {
		syscall.Close(s)
		return nil, err
	}
	f := os.NewFile(uintptr(s), "runtime")
	if _, err := io.WriteString(f, fmt.Sprintf("%s %d\n", id, fd)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lookPath resolves argv[0] like execvp(3) with the member's PATH.
func lookPath(file string, env []string, dir string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathVar := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			pathVar = kv[5:]
		}
	}
	denied := false
	for _, d := range filepath.SplitList(pathVar) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			continue
		}
		if st.Mode()&0o111 == 0 {
			denied = true
			continue
		}
		return p, nil
	}
	if denied {
		return "", syscall.EACCES
	}
	return "", syscall.ENOENT
}

func describe(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return "command not found (ENOENT)"
		case syscall.EACCES:
			return "permission denied (EACCES)"
		}
	}
	return err.Error()
}

func (l *launcher) spawn(r request) {
	fail := func(err error) { l.send("error", hexs(r.id), hexs(err.Error()), "0") }
	prog, err := lookPath(r.argv[0], r.env, r.dir)
	if err != nil {
		l.send("error", hexs(r.id), hexs(describe(err)), "0")
		return
	}
	stdout, err := l.connect(r.id, 1)
	if err != nil {
		fail(fmt.Errorf("connect to the runtime: %w", err))
		return
	}
	defer stdout.Close()
	stderr, err := l.connect(r.id, 2)
	if err != nil {
		fail(fmt.Errorf("connect to the runtime: %w", err))
		return
	}
	defer stderr.Close()
	l.groupsMu.Lock()
	if l.closing {
		l.groupsMu.Unlock()
		fail(errors.New("the launcher is closing"))
		return
	}
	l.groupsMu.Unlock()
	attr := &syscall.ProcAttr{
		Dir:   r.dir,
		Env:   r.env,
		Files: []uintptr{l.devnull.Fd(), stdout.Fd(), stderr.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	pid, err := forkInCgroup(prog, r, attr)
	if err != nil {
		var cg cgroupError
		if errors.As(err, &cg) {
			l.send("error", hexs(r.id), hexs(cg.Error()), "0")
			return
		}
		if errors.Is(err, syscall.ENOENT) && r.dir != "" {
			if _, statErr := os.Stat(r.dir); statErr != nil {
				l.send("error", hexs(r.id), hexs("chdir "+r.dir+": "+statErr.Error()), "0")
				return
			}
		}
		l.send("error", hexs(r.id), hexs(describe(err)), "0")
		return
	}
	l.groupsMu.Lock()
	l.groups[pid] = true
	if r.cgroupKind != "" {
		l.cgroups[r.cgroupDir] = r.cgroupKind
	}
	closing := l.closing
	l.groupsMu.Unlock()
	if closing {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	l.send("started", hexs(r.id), strconv.Itoa(pid))
}

// cgroupError marks a failure to place the child in its cgroup (reported as is, not as an exec error).
type cgroupError struct{ err error }

func (e cgroupError) Error() string { return e.err.Error() }

// forkInCgroup is syscall.ForkExec, with the child created inside r's cgroup when it names one (package doc).
func forkInCgroup(prog string, r request, attr *syscall.ProcAttr) (int, error) {
	switch r.cgroupKind {
	case "":
		return syscall.ForkExec(prog, r.argv, attr)
	case "v2":
		fd, err := syscall.Open(r.cgroupDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return 0, cgroupError{fmt.Errorf("cannot open cgroup %s: %w", r.cgroupDir, err)}
		}
		defer syscall.Close(fd)
		attr.Sys.UseCgroupFD = true
		attr.Sys.CgroupFD = fd
		return syscall.ForkExec(prog, r.argv, attr)
	}
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: when this goroutine returns, its thread (now in the member's cgroup) is terminated.
		runtime.LockOSThread()
		tasks := filepath.Join(r.cgroupDir, "tasks")
		if err := os.WriteFile(tasks, []byte(strconv.Itoa(syscall.Gettid())), 0); err != nil {
			done <- result{0, cgroupError{fmt.Errorf("cannot enter cgroup %s: %w", r.cgroupDir, err)}}
			return
		}
		pid, err := syscall.ForkExec(prog, r.argv, attr)
		done <- result{pid, err}
	}()
	res := <-done
	return res.pid, res.err
}

// reap reports every exited child; it runs on SIGCHLD.
func (l *launcher) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		// Forget a group once it is empty, so that the final sweep never signals a process group whose
		// id the kernel has since given to someone else (a pgid is not reused while its group has members).
		if syscall.Kill(-pid, 0) == syscall.ESRCH {
			l.groupsMu.Lock()
			delete(l.groups, pid)
			l.groupsMu.Unlock()
		}
		l.send("exit", strconv.Itoa(pid), strconv.Itoa(int(ws)))
	}
}

func (l *launcher) killAll() {
	l.groupsMu.Lock()
	l.closing = true
	pids := make([]int, 0, len(l.groups))
	for pid := range l.groups {
		pids = append(pids, pid)
	}
	l.groupsMu.Unlock()
	for _, pid := range pids {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	// What left its group (setsid) is still in its member's cgroup.
	l.groupsMu.Lock()
	cgroups := make(map[string]string, len(l.cgroups))
	for dir, kind := range l.cgroups {
		cgroups[dir] = kind
	}
	l.groupsMu.Unlock()
	for dir, kind := range cgroups {
		killCgroup(kind, dir)
	}
}

// killCgroup SIGKILLs every process of a member cgroup: v2 writes "1" to cgroup.kill; the v1 freezer is frozen
// (so nothing forks between the list and the kills), every pid of cgroup.procs is killed, and it is thawed.
// Best effort (the runtime is gone; `cohort reap` removes the directories).
func killCgroup(kind, dir string) {
	if kind == "v2" {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		return
	}
	state := filepath.Join(dir, "freezer.state")
	if os.WriteFile(state, []byte("FROZEN"), 0) != nil {
		return
	}
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(state); err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		self := os.Getpid()
		for _, line := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(line); err == nil && pid != self {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	os.WriteFile(state, []byte("THAWED"), 0)
}

// stdinPipeBytes is the capacity asked for the request pipe (Linux's default is 64 KiB; 1 MiB is the default
// /proc/sys/fs/pipe-max-size).
const stdinPipeBytes = 1 << 20

// growStdinPipe enlarges the pipe the runtime writes requests into (F_SETPIPE_SZ, fcntl(2), Linux). A request
// line carries the member's whole environment hex-encoded (1-2 KiB each), so a default 64 KiB pipe holds only
// some 40 of a level's requests: the rest waited for the runtime's event loop to come round and write them,
// while that loop was busy with the starts and probes of the same level. Best effort: where it fails (not
// Linux, not a pipe, above the limit) the pipe keeps its size.
func growStdinPipe() {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 7)
	if runtime.GOOS == "linux" {
		syscall.Syscall(syscall.SYS_FCNTL, 0, fSetPipeSz, stdinPipeBytes)
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-version" {
		fmt.Println("cohort-launcher", version)
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cohort-launcher <unix socket path> | -version")
		os.Exit(2)
	}
	// Survive a terminal's Ctrl-C, a SIGTERM or SIGHUP to the group, and a closed stdout: the runtime ends the
	// launcher by closing stdin. These are caught, not ignored, because ignored dispositions survive exec(2)
	// and members must start with the default ones.
	caught := make(chan os.Signal, 16)
	signal.Notify(caught, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for range caught {
		}
	}()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open /dev/null:", err)
		os.Exit(1)
	}
	l := &launcher{socket: os.Args[1], devnull: devnull, out: bufio.NewWriter(os.Stdout), groups: map[int]bool{}, cgroups: map[string]string{}}

	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		for range chld {
			l.reap()
		}
	}()

	work := make(chan request, 4096)
	var wg sync.WaitGroup
	for i := 0; i < 2*runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				l.spawn(r)
			}
		}()
	}

	growStdinPipe()
	diag, watch, noListen := openListen(l)
	if diag != nil {
		l.send("features", "watch", "lookup")
	}
	l.send("ready")
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			break // EOF (or a broken pipe): the runtime is gone
		}
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if f[0] == "watch" || f[0] == "unwatch" || f[0] == "lookup" {
			l.listenRequest(f, diag, watch, noListen)
			continue
		}
		if f[0] != "spawn" {
			continue
		}
		r, perr := parse(f[1:])
		if perr != nil {
			id := ""
			if len(f) > 1 {
				id = f[1]
			}
			l.send("error", id, hexs("bad request: "+perr.Error()), "0")
			continue
		}
		work <- r
	}
	// Refuse what is still queued, wait for spawns in flight (a vfork child must have exec'd and be in
	// l.groups before the sweep), then kill every member group.
	l.groupsMu.Lock()
	l.closing = true
	l.groupsMu.Unlock()
	close(work)
	wg.Wait()
	l.killAll()
	os.Exit(0)
}
