//go:build cgo && linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loop relays the messages of plain sessions on one OS thread, as
// PgBouncer does: the thread waits in epoll_wait, and the thread the
// kernel wakes reads, tracks and writes the message itself. Relayed by
// goroutines, each message would wait for Go's poller to wake a
// goroutine and the scheduler to run it, which costs more than the
// relaying itself on a virtual machine's cores (see doc.go, "Relaying").
//
// The loop owns a session's sockets while they pass messages through. A
// message the proxy may answer hands the session to its goroutine
// (looped.run), which answers it with blocking reads and writes and hands
// it back; meanwhile the loop does not watch its sockets.
type loop struct {
	epfd, wakefd int

	mu       sync.Mutex
	requests []loopRequest
	stopped  bool

	// The loop thread's own.
	sessions map[uint32]*session // by looped.id
	nextID   uint32
}

// The sides of a looped session, and epoll's tag of the wake-up event.
const (
	clientSide   = 0
	upstreamSide = 1
	wakeID       = 0
)

// looped is the loop's state of one session.
type looped struct {
	id       uint32
	fd       [2]int    // the sockets' descriptors, by side (see detach)
	interest [2]uint32 // the events registered for each side's socket, 0 none
	ready    [2]bool   // epoll said readable since a read last drained it
	// forward counts the bytes still to pass of a message read from that
	// side that goes through in pieces, unread.
	forward [2]int
	owned   bool           // the loop relays it; false: handed to its goroutine
	events  chan loopEvent // to the session's goroutine
	s       *session
}

func newLooped(s *session, fds [2]int) *looped {
	lp := &looped{s: s, fd: fds, events: make(chan loopEvent, 1)}
	s.looped = lp
	return lp
}

// loopEvent hands a session's goroutine a client message to answer, or
// tells it the session has ended (end, and why: err).
type loopEvent struct {
	m   message
	end bool
	err error
}

type loopRequest struct {
	s    *session
	kind byte // 'a' add, 'b' back from its goroutine, 'd' drop
}

// newLoop starts a loop; stop ends it.
func newLoop() (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeID}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	l := &loop{epfd: epfd, wakefd: wakefd, sessions: map[uint32]*session{}}
	go l.run()
	return l, nil
}

// stop ends the loop once every session has ended.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.wake()
}

func (l *loop) request(s *session, kind byte) {
	l.mu.Lock()
	l.requests = append(l.requests, loopRequest{s, kind})
	l.mu.Unlock()
	l.wake()
}

func (l *loop) wake() {
	one := [8]byte{1}
	unix.Write(l.wakefd, one[:])
}

func (l *loop) run() {
	// Never unlocked: the thread ends with the loop.
	runtime.LockOSThread()
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil && err != unix.EINTR {
			panic(fmt.Sprintf("proxy: epoll_wait: %v", err)) // the descriptors are the loop's own: a bug
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == wakeID {
				if l.serveRequests() {
					unix.Close(l.epfd)
					unix.Close(l.wakefd)
					return
				}
				continue
			}
			s := l.sessions[uint32(ev.Fd)]
			if s == nil || !s.looped.owned {
				continue // dropped, or handed over, after the event was taken
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				s.looped.ready[ev.Pad] = true
			}
			l.step(s)
		}
	}
}

// serveRequests takes the queued requests; true: the loop is to end.
func (l *loop) serveRequests() bool {
	var b [8]byte
	unix.Read(l.wakefd, b[:])
	l.mu.Lock()
	reqs := l.requests
	l.requests = nil
	stopped := l.stopped
	l.mu.Unlock()
	for _, r := range reqs {
		s, lp := r.s, r.s.looped
		switch r.kind {
		case 'a':
			for {
				l.nextID++
				if _, taken := l.sessions[l.nextID]; l.nextID != wakeID && !taken {
					break
				}
			}
			lp.id = l.nextID
			l.sessions[lp.id] = s
			fallthrough
		case 'b':
			lp.owned = true
			lp.ready = [2]bool{true, true} // bytes may be buffered, or have come meanwhile
			l.step(s)
		case 'd':
			l.end(s, nil)
		}
	}
	return stopped && len(l.sessions) == 0
}

// step relays what both sides of s have sent, as far as it goes without
// blocking, then watches its sockets for what it waits for.
func (l *loop) step(s *session) {
	lp := s.looped
	var err error
	for side := range 2 {
		if err = l.pump(s, side); err != nil || !lp.owned {
			break
		}
	}
	switch {
	case errors.Is(err, errEnded):
		l.end(s, nil)
	case err != nil:
		l.end(s, err)
	case lp.owned:
		c, u := len(s.c.w.buf) > 0, len(s.u.w.buf) > 0
		// A side is read only while what it sends can be written: a
		// client that does not read its results stops its session's
		// reading, as it would stop PostgreSQL's, and no other.
		err = l.watch(s, clientSide, interest(!u, c))
		if err == nil {
			err = l.watch(s, upstreamSide, interest(!c, u))
		}
		if err != nil {
			l.end(s, err)
		}
	}
}

// errEnded is the client's Terminate: the session ends well.
var errEnded = errors.New("proxy: session terminated")

func interest(read, write bool) uint32 {
	var ev uint32
	if read {
		ev |= unix.EPOLLIN
	}
	if write {
		ev |= unix.EPOLLOUT
	}
	return ev
}

// watch registers the events the loop waits for on a side's socket.
func (l *loop) watch(s *session, side int, events uint32) error {
	lp := s.looped
	if lp.interest[side] == events {
		return nil
	}
	op := unix.EPOLL_CTL_MOD
	switch {
	case lp.interest[side] == 0:
		op = unix.EPOLL_CTL_ADD
	case events == 0:
		op = unix.EPOLL_CTL_DEL
	}
	ev := unix.EpollEvent{Events: events, Fd: int32(lp.id), Pad: int32(side)}
	if err := unix.EpollCtl(l.epfd, op, lp.fd[side], &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	lp.interest[side] = events
	return nil
}

// end forgets s and tells its goroutine.
func (l *loop) end(s *session, err error) {
	lp := s.looped
	if l.sessions[lp.id] != s {
		return
	}
	for side := range 2 {
		l.watch(s, side, 0)
	}
	delete(l.sessions, lp.id)
	lp.owned = false
	lp.events <- loopEvent{end: true, err: err}
}

// pump relays the messages side has sent to the other side, reading
// while its socket has more, until the other side's socket takes no
// more, or a message hands the session to its goroutine.
func (l *loop) pump(s *session, side int) error {
	lp := s.looped
	from, to := s.c, s.u
	if side == upstreamSide {
		from, to = s.u, s.c
	}
	in, out := from.r, to.w
	defer func() {
		if lp.owned { // else handOver flushed it
			out.flush()
		}
	}()
	for {
		if len(out.buf) >= 4*bufferSize {
			if err := out.flush(); err != nil {
				return ignoreWouldBlock(err) // read on once it has taken them
			}
		}
		buf := in.buffered()
		if fwd := lp.forward[side]; fwd > 0 {
			if len(buf) == 0 {
				if ok, err := l.read(lp, side, in, 1); !ok {
					return err
				}
				continue
			}
			k := min(fwd, len(buf))
			out.Write(buf[:k])
			in.skip(k)
			lp.forward[side] -= k
			continue
		}
		if len(buf) < 5 {
			if ok, err := l.read(lp, side, in, 5); !ok {
				return err
			}
			continue
		}
		typ, n, err := in.peekHeader()
		if err != nil {
			return err
		}
		whole := n <= from.held && (side == upstreamSide && s.flow.watches(typ, n, s.u.held) || side == clientSide && inspectedClient(typ))
		if !whole {
			in.skip(5)
			if side == clientSide {
				if n > from.held {
					s.unread(typ)
				} else {
					s.track(typ)
				}
			}
			out.header(typ, n)
			lp.forward[side] = n
			continue
		}
		if len(buf) < 5+n {
			if ok, err := l.read(lp, side, in, 5+n); !ok {
				return err
			}
			continue
		}
		m := message{typ, buf[5 : 5+n]}
		in.skip(5 + n)
		switch {
		case side == upstreamSide:
			s.noteReply(m)
			s.c.send(m)
		case s.mayAnswer(m):
			return l.handOver(s, m)
		default:
			s.passOn(m)
			if typ == 'X' {
				return errEnded
			}
		}
	}
}

// inspectedClient reports whether a client message is read whole as it
// passes: the proxy may answer it, or it changes which statements the
// proxy may answer.
func inspectedClient(typ byte) bool {
	return typ == 'Q' || typ == 'P' || typ == 'B' || typ == 'C' || typ == 'X'
}

// read reads a side's socket once epoll has said it is readable, with
// room for n buffered bytes; ok false: nothing more to do on this side
// for now, and err why if it is an error.
func (l *loop) read(lp *looped, side int, in *inbox, n int) (ok bool, err error) {
	if !lp.ready[side] {
		return false, nil
	}
	err = in.more(n)
	lp.ready[side] = err == nil && !in.drained
	if err != nil {
		return false, ignoreWouldBlock(err)
	}
	return true, nil
}

func ignoreWouldBlock(err error) error {
	if err == errWouldBlock {
		return nil
	}
	return err
}

// handOver gives s to its goroutine with a message to answer.
func (l *loop) handOver(s *session, m message) error {
	lp := s.looped
	for side := range 2 {
		if err := l.watch(s, side, 0); err != nil {
			return err
		}
	}
	lp.owned = false
	s.c.flush() // what the sockets do not take, the goroutine writes first
	s.u.flush()
	lp.events <- loopEvent{m: m}
	return nil
}

// detach takes a session's sockets out of Go's poller for the loop: the
// loop's descriptors are duplicates, and the connections are closed.
// Left in Go's poller too, every message would also wake the runtime's
// thread that waits in it, for nothing: on two cores, about 40 µs a
// statement passed through. false: either is not a socket the loop can
// relay (TLS).
func detach(conns ...net.Conn) (fds [2]int, ok bool, err error) {
	var raws [2]syscall.RawConn
	for i, c := range conns {
		sc, isSocket := c.(syscall.Conn)
		if !isSocket {
			return fds, false, nil
		}
		if raws[i], err = sc.SyscallConn(); err != nil {
			return fds, false, nil
		}
	}
	for i, rc := range raws {
		fds[i] = -1
		var derr error
		if err = rc.Control(func(fd uintptr) { fds[i], derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err == nil {
			err = derr
		}
		if err != nil {
			closeFDs(fds[:i])
			return fds, false, fmt.Errorf("proxy: duplicating a socket for the loop: %w", err)
		}
	}
	for _, c := range conns {
		c.Close() // the duplicate keeps the socket open
	}
	return fds, true, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// attach gives a session's goroutine blocking connections on the loop's
// descriptors, through Go's poller, while it answers; closing them
// leaves the descriptors to the loop.
func attach(fds [2]int) (conns [2]net.Conn, err error) {
	for i, fd := range fds {
		var dup int
		if dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			f := os.NewFile(uintptr(dup), "socket")
			conns[i], err = net.FileConn(f) // a duplicate of its own
			f.Close()
		}
		if err != nil {
			if i == 1 {
				conns[0].Close()
			}
			return conns, fmt.Errorf("proxy: a connection on the loop's socket: %w", err)
		}
	}
	return conns, nil
}

// run is the goroutine of a session the loop relays: it answers what
// the loop hands it, until the session ends or ctx does.
func (lp *looped) run(ctx context.Context, l *loop) error {
	s, fds := lp.s, lp.fd
	defer closeFDs(fds[:])
	s.c.useFD(fds[clientSide])
	s.u.useFD(fds[upstreamSide])
	l.request(s, 'a')
	s.p.stats.looped.Add(1)
	done := ctx.Done()
	for {
		var ev loopEvent
		select {
		case ev = <-lp.events:
		case <-done:
			l.request(s, 'd')
			done = nil
			continue
		}
		if ev.end {
			lp.flushLast()
			return quiet(ev.err)
		}
		if done == nil {
			continue // dropped: the end is on its way
		}
		if err := lp.answerAttached(ctx, ev.m); err != nil {
			l.request(s, 'd')
			for ev := range lp.events {
				if ev.end {
					return quiet(err)
				}
			}
		}
		s.c.useFD(fds[clientSide])
		s.u.useFD(fds[upstreamSide])
		l.request(s, 'b')
	}
}

// answerAttached answers a message the loop handed over, and what
// follows it as keepAnswering says, through connections of its own.
func (lp *looped) answerAttached(ctx context.Context, m message) error {
	s := lp.s
	conns, err := attach(lp.fd)
	if err != nil {
		return err
	}
	closeBoth := func() {
		conns[0].Close()
		conns[1].Close()
	}
	defer closeBoth()
	stop := context.AfterFunc(ctx, closeBoth) // unblocks a read that waits
	defer stop()
	s.c.useConn(conns[clientSide])
	s.u.useConn(conns[upstreamSide])
	return lp.keepAnswering(m)
}

// flushLast writes, for a second at most, what the loop could not write
// before the session ended: the client's last replies (an error before
// PostgreSQL closed), a Terminate.
func (lp *looped) flushLast() {
	s := lp.s
	if len(s.c.w.buf) == 0 && len(s.u.w.buf) == 0 {
		return
	}
	conns, err := attach(lp.fd)
	if err != nil {
		return
	}
	for i, w := range []*wire{s.c, s.u} {
		conns[i].SetWriteDeadline(time.Now().Add(time.Second))
		w.useConn(conns[i])
		w.flush()
		conns[i].Close()
	}
}

// defaultStickiness is how long a session's goroutine keeps it after an
// answer, waiting for the client's next message. A client that asks for
// neighbours tends to ask again at once; through Go's poller its next
// message wakes the goroutine directly, where handing the session to
// the loop and back would wake two threads a statement, and, with every
// processor busy, wait for the runtime to take the loop thread's
// processor back (docs/benchmarks, "Keeping a session after an
// answer"). Meanwhile PostgreSQL's notifications and notices wait in the
// socket: for at most this long.
const defaultStickiness = 10 * time.Millisecond

// keepAnswering answers a message the loop handed over, with blocking
// reads and writes (first passing the rest of a reply the loop was
// relaying in pieces), then the client's next ones while they are
// messages the proxy may answer, arrive within the stickiness, and are read
// whole; the first that is not is left to the loop.
func (lp *looped) keepAnswering(m message) error {
	s := lp.s
	if n := lp.forward[upstreamSide]; n > 0 {
		lp.forward[upstreamSide] = 0
		if err := s.u.r.copyTo(s.c.w, n); err != nil {
			return err
		}
	}
	for {
		if err := s.handle(m); err != nil {
			return err
		}
		if err := s.u.flush(); err != nil {
			return err
		}
		if err := s.c.flush(); err != nil {
			return err
		}
		if s.flow.owed() {
			// PostgreSQL owes replies to what went through, which the
			// client waits for: the loop relays them.
			return nil
		}
		next, ok, err := lp.nextAnswerable()
		if !ok {
			return err
		}
		m = next
	}
}

// nextAnswerable reads the client's next message if mayAnswer says so
// and it comes whole within the stickiness; otherwise it is left
// buffered, unread.
func (lp *looped) nextAnswerable() (m message, ok bool, err error) {
	s := lp.s
	in := s.c.r
	in.conn.SetReadDeadline(time.Now().Add(s.p.stickiness))
	defer in.conn.SetReadDeadline(time.Time{}) // answering it reads on
	if err := in.need(5); err != nil {
		return m, false, ignoreTimeout(err)
	}
	typ, n, err := in.peekHeader()
	if err != nil || n > s.c.held || !inspectedClient(typ) {
		return m, false, err
	}
	if err := in.need(5 + n); err != nil {
		return m, false, ignoreTimeout(err)
	}
	m = message{typ, in.buffered()[5 : 5+n]}
	if !s.mayAnswer(m) {
		return m, false, nil
	}
	in.skip(5 + n)
	return m, true, nil
}

func ignoreTimeout(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}
