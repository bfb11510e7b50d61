// Listen watches and listener lookups: which socket would accept a TCP connection to an address and port, asked
// of the kernel through NETLINK_SOCK_DIAG (sock_diag(7)) one socket at a time.
//
// The request is SOCK_DIAG_BY_FAMILY WITHOUT NLM_F_DUMP (an "exact" request) carrying an inet_diag_req_v2
// (include/uapi/linux/inet_diag.h, include/uapi/linux/sock_diag.h) for IPPROTO_TCP whose socket id names only the
// local side: idiag_src = the address, idiag_sport = the port, the remote side, the interface and the cookie
// left as wildcards (0, and INET_DIAG_NOCOOKIE). net/ipv4/inet_diag.c (inet_diag_handler_cmd ->
// inet_diag_cmd_exact -> the protocol handler's dump_one) passes it to the TCP handler's find-one function
// (net/ipv4/tcp_diag.c tcp_diag_find_one_icsk since Linux 6.15, inet_diag_find_one_icsk in net/ipv4/inet_diag.c
// before), which calls inet_lookup()/inet6_lookup() with the request's source as the packet's destination: no
// established socket has a zero remote address and port, so the lookup falls through to __inet_lookup_listener
// (net/ipv4/inet_hashtables.c), which looks up the listening hash by (address, port) and then (wildcard, port),
// the same O(1) lookup an incoming SYN gets. The answer is one inet_diag_msg (idiag_state, idiag_uid,
// idiag_inode: the socket's inode, as in /proc/net/tcp and /proc/<pid>/fd) or NLMSG_ERROR -ENOENT when nothing
// would accept. An IPv4 address also finds a dual-stack [::] listener (not an IPV6_V6ONLY one), as a connect does.
// No privilege is needed (CAP_NET_ADMIN only adds the socket mark). Reading /proc/net/tcp instead walks every
// bucket of the listening hash: 4-15 ms per read on the dev VM, against 6-10 us for one exact lookup, ~2 us each
// when sent 32 to a message (docs/host.md "Measured: the runtime and the process backend").
//
// The kernel handles a request inside sendmsg(2) (sock_diag's netlink input runs in the sender's context,
// net/core/sock_diag.c sock_diag_rcv), so the replies to a batch are queued before sendto returns and are read
// without blocking; a reply the receive buffer had no room for is missing, and its query is asked again.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	sockDiagByFamily = 20         // SOCK_DIAG_BY_FAMILY, include/uapi/linux/sock_diag.h
	tcpListen        = 10         // TCP_LISTEN, include/net/tcp_states.h
	inetDiagNoCookie = 0xffffffff // INET_DIAG_NOCOOKIE, include/uapi/linux/inet_diag.h
	nlmsgHdrLen      = 16         // struct nlmsghdr
	diagReqLen       = 56         // struct inet_diag_req_v2
	diagMsgLen       = 72         // struct inet_diag_msg
	// diagBatch is how many requests go in one sendto: their replies (~1-2 KiB of receive buffer each) fit in
	// the default 208 KiB socket buffer.
	diagBatch = 32
	// watchPeriod is the pause between two rounds of lookups for the pending watches (one round: one exact
	// lookup per watch, ~2 us each). A member is seen listening at most this long (plus a round) after its
	// listen(2). While 400 watches were pending the launcher used 20% of a core at 5 ms and 13% at 10 ms, and
	// the start-up bench could not tell the two apart (docs/host.md "Measured: the runtime and the process
	// backend").
	watchPeriod = 10 * time.Millisecond
)

// listenQuery names a local TCP address: family (AF_INET or AF_INET6), address bytes (4 or 16 used) and port.
type listenQuery struct {
	family uint8
	addr   [16]byte
	port   uint16
}

// listenAnswer is what the kernel said of one listenQuery: the LISTEN socket that would accept (inode != 0, with
// its owner's uid), none (inode 0, err nil), or err (an errno other than ENOENT). answered is false when no
// reply was read (the receive buffer overflowed): ask again.
type listenAnswer struct {
	answered   bool
	inode, uid uint32
	err        error
}

// parseListenQuery reads an IP address literal ("127.0.0.1", "::1", "::ffff:127.0.0.1"; no zone) and a port
// (1-65535). An IPv4-mapped address is looked up as IPv4.
func parseListenQuery(host, port string) (listenQuery, error) {
	var q listenQuery
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return q, fmt.Errorf("not an IP address literal without a zone: %q", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return q, fmt.Errorf("bad port %q", port)
	}
	q.port = uint16(p)
	if a = a.Unmap(); a.Is4() {
		q.family = syscall.AF_INET
		b := a.As4()
		copy(q.addr[:], b[:])
	} else {
		q.family = syscall.AF_INET6
		q.addr = a.As16()
	}
	return q, nil
}

// sockDiag is one NETLINK_SOCK_DIAG socket, shared by the watcher and the lookups (one batch at a time).
type sockDiag struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	out []byte
	in  []byte
}

// openSockDiag opens the netlink socket and checks that exact lookups work here: it listens on 127.0.0.1:0 and
// must find that very socket (its inode, from fstat), and nothing once it is closed. A kernel without the
// inet_diag/tcp_diag handlers (not built, not loadable) answers ENOENT to everything, which would read as
// "nothing listens": that is an error here, so the launcher does not offer watches and lookups at all.
func openSockDiag() (*sockDiag, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("netlink sock_diag socket: %w", err)
	}
	d := &sockDiag{fd: fd, in: make([]byte, 64<<10)}
	if err := d.selfTest(); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return d, nil
}

func (d *sockDiag) selfTest() error {
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			syscall.Close(s)
		}
	}()
	if err := syscall.Bind(s, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err := syscall.Listen(s, 1); err != nil {
		return err
	}
	sa, err := syscall.Getsockname(s)
	if err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(s, &st); err != nil {
		return err
	}
	q := listenQuery{family: syscall.AF_INET, addr: [16]byte{127, 0, 0, 1}, port: uint16(sa.(*syscall.SockaddrInet4).Port)}
	a := d.lookupOne(q)
	if a.err != nil || a.inode != uint32(st.Ino) {
		return fmt.Errorf("sock_diag exact lookup self-test: found inode %d (error %v), want %d", a.inode, a.err, st.Ino)
	}
	syscall.Close(s)
	closed = true
	if a = d.lookupOne(q); a.err != nil || a.inode != 0 {
		return fmt.Errorf("sock_diag exact lookup self-test: a closed listener still found (inode %d, error %v)", a.inode, a.err)
	}
	return nil
}

// lookupOne is lookup for one query, asked up to 3 times while unanswered.
func (d *sockDiag) lookupOne(q listenQuery) listenAnswer {
	for i := 0; i < 3; i++ {
		if a := d.lookup([]listenQuery{q})[0]; a.answered {
			return a
		}
	}
	return listenAnswer{answered: true, err: errors.New("no answer from sock_diag")}
}

// lookup asks the kernel about every query, diagBatch requests to a sendto; the answers are in query order.
func (d *sockDiag) lookup(qs []listenQuery) []listenAnswer {
	d.mu.Lock()
	defer d.mu.Unlock()
	answers := make([]listenAnswer, len(qs))
	for start := 0; start < len(qs); start += diagBatch {
		end := min(start+diagBatch, len(qs))
		first := d.seq + 1
		d.out = d.out[:0]
		for _, q := range qs[start:end] {
			d.seq++
			d.out = appendDiagRequest(d.out, d.seq, q)
		}
		if err := syscall.Sendto(d.fd, d.out, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
			for i := start; i < end; i++ {
				answers[i] = listenAnswer{answered: true, err: fmt.Errorf("sock_diag sendto: %w", err)}
			}
			continue
		}
		d.drain(first, answers[start:end])
	}
	return answers
}

// appendDiagRequest appends one nlmsghdr + inet_diag_req_v2 (native byte order, but the port and address in
// network order, as the uapi header declares them __be16/__be32).
func appendDiagRequest(b []byte, seq uint32, q listenQuery) []byte {
	at := len(b)
	b = append(b, make([]byte, nlmsgHdrLen+diagReqLen)...)
	h := b[at:]
	binary.NativeEndian.PutUint32(h[0:], nlmsgHdrLen+diagReqLen) // nlmsg_len
	binary.NativeEndian.PutUint16(h[4:], sockDiagByFamily)       // nlmsg_type
	binary.NativeEndian.PutUint16(h[6:], syscall.NLM_F_REQUEST)  // nlmsg_flags: no NLM_F_DUMP
	binary.NativeEndian.PutUint32(h[8:], seq)                    // nlmsg_seq
	r := h[nlmsgHdrLen:]
	r[0] = q.family                                         // sdiag_family
	r[1] = syscall.IPPROTO_TCP                              // sdiag_protocol
	binary.NativeEndian.PutUint32(r[4:], 1<<tcpListen)      // idiag_states (an exact request does not filter by it)
	binary.BigEndian.PutUint16(r[8:], q.port)               // id.idiag_sport
	copy(r[12:28], q.addr[:])                               // id.idiag_src (idiag_dport, idiag_dst, idiag_if: 0)
	binary.NativeEndian.PutUint32(r[48:], inetDiagNoCookie) // id.idiag_cookie[0]
	binary.NativeEndian.PutUint32(r[52:], inetDiagNoCookie) // id.idiag_cookie[1]
	return b
}

// drain reads every queued reply without blocking and fills in the answers of the batch whose first sequence
// number is first; replies of other batches (late, after an overflow) are dropped.
func (d *sockDiag) drain(first uint32, answers []listenAnswer) {
	for {
		n, _, err := syscall.Recvfrom(d.fd, d.in, syscall.MSG_DONTWAIT)
		if err == syscall.EINTR || err == syscall.ENOBUFS {
			continue // ENOBUFS: some replies were dropped; their queries stay unanswered
		}
		if err != nil || n <= 0 {
			return // EAGAIN: every reply queued has been read
		}
		msgs, perr := syscall.ParseNetlinkMessage(d.in[:n])
		if perr != nil {
			continue
		}
		for _, m := range msgs {
			i := int(m.Header.Seq - first)
			if m.Header.Seq < first || i >= len(answers) {
				continue
			}
			a := &answers[i]
			switch {
			case m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4:
				*a = listenAnswer{answered: true}
				if errno := syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data[0:4]))); errno != 0 && errno != syscall.ENOENT {
					a.err = fmt.Errorf("sock_diag: %w", errno)
				}
			case m.Header.Type == sockDiagByFamily && len(m.Data) >= diagMsgLen:
				*a = listenAnswer{answered: true}
				if m.Data[1] == tcpListen { // idiag_state
					a.uid = binary.NativeEndian.Uint32(m.Data[64:68])   // idiag_uid
					a.inode = binary.NativeEndian.Uint32(m.Data[68:72]) // idiag_inode
				}
			}
		}
	}
}

// watches holds the pending listen watches (id -> query) and the goroutine that polls them.
type watches struct {
	diag    *sockDiag
	report  func(id string, a listenAnswer)
	mu      sync.Mutex
	pending map[string]listenQuery
	wake    chan struct{}
}

func newWatches(d *sockDiag, report func(id string, a listenAnswer)) *watches {
	w := &watches{diag: d, report: report, pending: map[string]listenQuery{}, wake: make(chan struct{}, 1)}
	go w.loop()
	return w
}

func (w *watches) add(id string, q listenQuery) {
	w.mu.Lock()
	w.pending[id] = q
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watches) remove(id string) {
	w.mu.Lock()
	delete(w.pending, id)
	w.mu.Unlock()
}

// loop: one round of lookups every watchPeriod while any watch is pending, asleep while none is. A watch ends
// (and is reported) when its answer is a listener or an error.
func (w *watches) loop() {
	var ids []string
	var qs []listenQuery
	for {
		w.mu.Lock()
		ids, qs = ids[:0], qs[:0]
		for id, q := range w.pending {
			ids = append(ids, id)
			qs = append(qs, q)
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			<-w.wake
			continue
		}
		for i, a := range w.diag.lookup(qs) {
			if !a.answered || (a.inode == 0 && a.err == nil) {
				continue
			}
			w.mu.Lock()
			_, still := w.pending[ids[i]]
			delete(w.pending, ids[i])
			w.mu.Unlock()
			if still {
				w.report(ids[i], a)
			}
		}
		time.Sleep(watchPeriod)
	}
}

// listenReply is the line answering a watch (kind "listening": `listening <id> <inode> [<hex error>]`) or a
// lookup (kind "listener": `listener <tag> <inode> <uid> [<hex error>]`); inode 0: none (or the error).
func listenReply(kind, tag string, a listenAnswer) []string {
	fields := []string{kind, tag, strconv.FormatUint(uint64(a.inode), 10)}
	if kind == "listener" {
		fields = append(fields, strconv.FormatUint(uint64(a.uid), 10))
	}
	if a.err != nil {
		fields = append(fields, hexs(a.err.Error()))
	}
	return fields
}

// listenRequest handles `watch <id> <hex host> <port>`, `unwatch <id>` and `lookup <tag> <hex host> <port>` (the
// protocol in the package doc). d and w are nil when exact lookups do not work here (openListen failed, and the
// launcher did not announce them); a watch or lookup is then answered at once with that reason.
func (l *launcher) listenRequest(f []string, d *sockDiag, w *watches, unavailable error) {
	kind := map[string]string{"watch": "listening", "lookup": "listener"}[f[0]]
	if f[0] == "unwatch" {
		if len(f) == 2 && w != nil {
			w.remove(f[1])
		}
		return
	}
	if kind == "" || len(f) < 2 || f[1] == "" {
		return // nothing to answer to
	}
	tag := f[1]
	fail := func(err error) { l.send(listenReply(kind, tag, listenAnswer{err: err})...) }
	if len(f) != 4 {
		fail(errors.New("bad request: want <id> <hex host> <port>"))
		return
	}
	if d == nil {
		fail(unavailable)
		return
	}
	host, err := unhex(f[2])
	if err != nil {
		fail(fmt.Errorf("bad host: %w", err))
		return
	}
	q, err := parseListenQuery(host, f[3])
	if err != nil {
		fail(err)
		return
	}
	if f[0] == "watch" {
		w.add(tag, q)
		return
	}
	l.send(listenReply(kind, tag, d.lookupOne(q))...)
}

// openListen opens the sock_diag socket and starts the watcher; it returns nils and the reason when exact
// lookups do not work here (the `features` line then does not name them).
func openListen(l *launcher) (*sockDiag, *watches, error) {
	d, err := openSockDiag()
	if err != nil {
		return nil, nil, err
	}
	return d, newWatches(d, func(id string, a listenAnswer) { l.send(listenReply("listening", id, a)...) }), nil
}
