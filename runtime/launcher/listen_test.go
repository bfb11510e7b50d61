package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// procListenInode is the inode /proc/net/tcp lists for the LISTEN socket on port (proc(5)), or 0.
func procListenInode(t *testing.T, port int) uint32 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		if p, _ := strconv.ParseUint(f[1][strings.LastIndex(f[1], ":")+1:], 16, 16); int(p) == port {
			n, _ := strconv.ParseUint(f[9], 10, 32)
			return uint32(n)
		}
	}
	return 0
}

func TestParseListenQuery(t *testing.T) {
	for _, c := range []struct {
		host   string
		family uint8
		addr   []byte
	}{
		{"127.0.0.1", syscall.AF_INET, []byte{127, 0, 0, 1}},
		{"::ffff:127.0.0.1", syscall.AF_INET, []byte{127, 0, 0, 1}},
		{"::1", syscall.AF_INET6, append(make([]byte, 15), 1)},
	} {
		q, err := parseListenQuery(c.host, "8080")
		if err != nil || q.family != c.family || q.port != 8080 || string(q.addr[:len(c.addr)]) != string(c.addr) {
			t.Errorf("parseListenQuery(%q) = %+v, %v", c.host, q, err)
		}
	}
	for _, bad := range [][2]string{{"localhost", "80"}, {"fe80::1%lo", "80"}, {"127.0.0.1", "0"}, {"127.0.0.1", "65536"}, {"127.0.0.1", "x"}} {
		if _, err := parseListenQuery(bad[0], bad[1]); err == nil {
			t.Errorf("parseListenQuery(%q, %q): no error", bad[0], bad[1])
		}
	}
}

// TestLookupBatches asks about more sockets than one batch holds, half of them listening: every answer is the
// socket /proc/net/tcp lists, or none.
func TestLookupBatches(t *testing.T) {
	d, err := openSockDiag()
	if err != nil {
		t.Fatal(err)
	}
	var qs []listenQuery
	var want []uint32
	var closed []net.Listener // closed once all are made, so that no later listener gets a closed one's port
	for i := 0; i < 3*diagBatch+5; i++ {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		q, _ := parseListenQuery("127.0.0.1", strconv.Itoa(port))
		qs = append(qs, q)
		if i%2 == 0 {
			defer l.Close()
			want = append(want, procListenInode(t, port))
		} else {
			closed = append(closed, l)
			want = append(want, 0)
		}
	}
	for _, l := range closed {
		l.Close()
	}
	for i, a := range d.lookup(qs) {
		if !a.answered || a.err != nil || a.inode != want[i] {
			t.Errorf("query %d (port %d): %+v, want inode %d", i, qs[i].port, a, want[i])
		}
	}
}
