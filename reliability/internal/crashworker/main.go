// Command crashworker is the process the crash test (reliability/crash_test.go)
// kills with SIGKILL at random moments. It runs a sender client on a SQLite
// file and two recipient clients (each on its own SQLite file) over an
// in-process transport, and performs random sends, ACK deliveries, abandons,
// retries and page checks.
//
// Journal protocol (one line per record, each line fsynced):
//
//	begin <op> ...                    written before a call that may change the sender's pending queue
//	sent <recipient> <id> <seq> <sha> written after Send returned (the message is pending)
//	senderr                           Send returned without storing the message
//	acked <id>                        Receive of an ACK returned cleared=true
//	ackmiss <id>                      Receive of an ACK returned cleared=false
//	recverr                           Receive of an envelope returned an error
//	abandoned <id>                    AbandonPending returned Abandoned
//	notpending <id>                   AbandonPending returned NotPending
//	retried <recipient> <n>           RetryPendingMessages returned
//	drained                           (-drain) nothing is pending any more
//
// A record is written only after the call it describes has returned, so a
// "begin" without its result is the one operation the kill interrupted.
//
// Exit codes: 0 done, 2 usage or setup failure, 3 an operation failed in a
// way it must not, 4 a self-check found the queue differing from the
// journal, 5 -drain could not empty the queue.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport"
)

// Addresses of the three devices; the crash test uses the same ones.
var (
	senderAddr = ids.DeviceAddress{UserID: "alice", DeviceID: 1}
	recipients = []ids.DeviceAddress{{UserID: "bob", DeviceID: 1}, {UserID: "carol", DeviceID: 7}}
)

type device struct {
	addr  ids.DeviceAddress
	store *sqlitestore.Store
	c     *client.Client
}

type pendingMsg struct {
	to  ids.DeviceAddress
	seq int64
}

type worker struct {
	ctx     context.Context
	rng     *rand.Rand
	journal *os.File
	net     *transport.Network
	sender  device
	rcpts   []device
	pending map[ids.LogicalMessageID]pendingMsg
	gone    []ids.LogicalMessageID // acked or abandoned, for NotPending abandons
}

func main() {
	dir := flag.String("dir", "", "directory holding the database files")
	journalPath := flag.String("journal", "", "journal file (appended)")
	keyHex := flag.String("key", "", "storage key, hex (32 bytes)")
	seed := flag.Uint64("seed", 1, "random seed")
	ops := flag.Int("ops", 0, "stop after this many operations (0: run until killed)")
	drain := flag.Bool("drain", false, "deliver, acknowledge and retry until nothing is pending, then exit")
	flag.Parse()
	if *dir == "" || *journalPath == "" || *keyHex == "" {
		fail(2, "usage: crashworker -dir DIR -journal FILE -key HEX [-seed N] [-ops N] [-drain]")
	}
	secret, err := hex.DecodeString(*keyHex)
	if err != nil {
		fail(2, "key: %v", err)
	}
	key, err := seal.NewKey(secret)
	if err != nil {
		fail(2, "key: %v", err)
	}
	j, err := os.OpenFile(*journalPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fail(2, "journal: %v", err)
	}
	w := &worker{
		ctx:     context.Background(),
		rng:     rand.New(rand.NewPCG(*seed, 0x5eed)),
		journal: j,
		net:     transport.NewNetwork(),
		pending: map[ids.LogicalMessageID]pendingMsg{},
	}
	w.sender = w.open(*dir, "sender.db", senderAddr, key)
	for i, a := range recipients {
		w.rcpts = append(w.rcpts, w.open(*dir, fmt.Sprintf("recipient%d.db", i+1), a, key))
	}
	w.load()
	fmt.Println("ready")

	if *drain {
		w.drain()
		return
	}
	for i := 0; *ops == 0 || i < *ops; i++ {
		w.step()
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "crashworker: "+format+"\n", args...)
	os.Exit(code)
}

// open reopens (or creates) a device's store and client, and publishes its
// bundle on this process's network.
func (w *worker) open(dir, file string, addr ids.DeviceAddress, key seal.Key) device {
	keys, err := seal.NewKeyring(key)
	if err != nil {
		fail(2, "keyring: %v", err)
	}
	s, err := sqlitestore.Open(w.ctx, filepath.Join(dir, file), keys)
	if err != nil {
		fail(2, "open %s: %v", file, err)
	}
	c, err := client.Open(w.ctx, client.Config{Store: s, Transport: w.net, Directory: w.net})
	if err != nil {
		fail(2, "client open %s: %v", file, err)
	}
	// Initialize creates the identity the first time and republishes the
	// bundle after a restart (the in-process directory is gone).
	if err := c.Initialize(w.ctx, addr); err != nil {
		fail(2, "initialize %s: %v", file, err)
	}
	return device{addr: addr, store: s, c: c}
}

// load reads the sender's pending queue, the worker's view of it.
func (w *worker) load() {
	for _, m := range w.walk(100) {
		w.pending[m.ID] = pendingMsg{to: m.Recipient, seq: m.Sequence}
	}
}

func (w *worker) walk(limit int) []client.PendingMessage {
	var out []client.PendingMessage
	var after *int64
	for {
		p, err := w.sender.c.PendingMessages(w.ctx, client.PageRequest{After: after, Limit: limit})
		if err != nil {
			fail(3, "page: %v", err)
		}
		out = append(out, p.Messages...)
		if p.NextAfterSequence == nil {
			return out
		}
		after = p.NextAfterSequence
	}
}

func (w *worker) record(format string, args ...any) {
	if _, err := fmt.Fprintf(w.journal, format+"\n", args...); err != nil {
		fail(2, "journal: %v", err)
	}
	if err := w.journal.Sync(); err != nil {
		fail(2, "journal sync: %v", err)
	}
}

func (w *worker) step() {
	switch r := w.rng.IntN(100); {
	case r < 35:
		w.send(recipients[w.rng.IntN(len(recipients))])
	case r < 55:
		w.deliver()
	case r < 75:
		w.acks()
	case r < 87:
		w.abandon()
	case r < 95:
		w.retry(recipients[w.rng.IntN(len(recipients))])
	default:
		w.check()
	}
}

// Plaintext digest, journaled so that the test can check that a pending
// row opens to exactly the plaintext that was sent.
func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

func (w *worker) send(to ids.DeviceAddress) {
	hw, err := w.sender.store.SequenceHighWater(w.ctx)
	if err != nil {
		fail(3, "high-water mark: %v", err)
	}
	body := make([]byte, 16+w.rng.IntN(600))
	for i := range body {
		body[i] = byte(w.rng.Uint32())
	}
	w.record("begin send %s %d", to, hw)
	id, err := w.sender.c.Send(w.ctx, to, body)
	if err != nil && !errors.Is(err, client.ErrMessageNotSent) {
		// Not stored: nothing to record but the failure.
		fmt.Fprintf(os.Stderr, "send: %v\n", err)
		w.record("senderr")
		return
	}
	// Find its sequence: the first pending message to `to` after the
	// high-water mark read before the send (nothing else runs meanwhile).
	p, perr := w.sender.c.PendingMessages(w.ctx, client.PageRequest{After: &hw, Limit: 1, Recipient: &to})
	if perr != nil {
		fail(3, "page after send: %v", perr)
	}
	if len(p.Messages) != 1 || p.Messages[0].ID != id {
		fail(4, "sent %s (err %v) but the page after %d holds %v", id, err, hw, p.Messages)
	}
	m := p.Messages[0]
	if !slices.Equal(m.Plaintext, body) {
		fail(4, "pending %s opens to another plaintext", id)
	}
	w.pending[id] = pendingMsg{to: to, seq: m.Sequence}
	w.record("sent %s %s %d %s", to, id, m.Sequence, digest(body))
}

// deliver lets every recipient receive its mailbox (and ACK back). It does
// not touch the sender's queue.
func (w *worker) deliver() {
	for _, r := range w.rcpts {
		envs, err := w.net.Receive(w.ctx, r.addr)
		if err != nil {
			fail(3, "transport receive: %v", err)
		}
		for _, raw := range envs {
			if _, err := r.c.Receive(w.ctx, raw); err != nil {
				fmt.Fprintf(os.Stderr, "recipient %s: receive: %v\n", r.addr, err)
			}
		}
	}
}

// acks lets the sender receive the ACKs in its mailbox, one journaled call
// per envelope.
func (w *worker) acks() {
	envs, err := w.net.Receive(w.ctx, w.sender.addr)
	if err != nil {
		fail(3, "transport receive: %v", err)
	}
	for _, raw := range envs {
		w.record("begin recv")
		res, err := w.sender.c.Receive(w.ctx, raw)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sender: receive: %v\n", err)
			w.record("recverr")
			continue
		}
		a, ok := res.(*client.Acknowledgement)
		if !ok {
			fail(3, "sender received %T, want an acknowledgement", res)
		}
		if a.Cleared {
			if _, ok := w.pending[a.ID]; !ok {
				fail(4, "ACK cleared %s, which was not pending", a.ID)
			}
			delete(w.pending, a.ID)
			w.gone = append(w.gone, a.ID)
			w.record("acked %s", a.ID)
		} else {
			if _, ok := w.pending[a.ID]; ok {
				fail(4, "ACK for pending %s did not clear it", a.ID)
			}
			w.record("ackmiss %s", a.ID)
		}
	}
}

func (w *worker) abandon() {
	var (
		to ids.DeviceAddress
		id ids.LogicalMessageID
	)
	switch r := w.rng.IntN(10); {
	case r < 7 && len(w.pending) > 0:
		keys := make([]ids.LogicalMessageID, 0, len(w.pending))
		for k := range w.pending {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b ids.LogicalMessageID) int { return slices.Compare(a[:], b[:]) })
		id = keys[w.rng.IntN(len(keys))]
		to = w.pending[id].to
		if r == 0 {
			// The right id for the wrong recipient: not pending there.
			to = recipients[(slices.Index(recipients, to)+1)%len(recipients)]
		}
	case r < 9 && len(w.gone) > 0:
		id = w.gone[w.rng.IntN(len(w.gone))]
		to = recipients[w.rng.IntN(len(recipients))]
	default:
		id = ids.NewLogicalMessageID()
		to = recipients[w.rng.IntN(len(recipients))]
	}
	w.record("begin abandon %s %s", to, id)
	st, err := w.sender.c.AbandonPending(w.ctx, to, id)
	if err != nil {
		fail(3, "abandon: %v", err)
	}
	p, isPending := w.pending[id]
	isPending = isPending && p.to == to
	switch st {
	case client.Abandoned:
		if !isPending {
			fail(4, "abandon of %s to %s said ABANDONED, but it was not pending", id, to)
		}
		delete(w.pending, id)
		w.gone = append(w.gone, id)
		w.record("abandoned %s", id)
	case client.NotPending:
		if isPending {
			fail(4, "abandon of pending %s to %s said NOT_PENDING", id, to)
		}
		w.record("notpending %s", id)
	default:
		fail(3, "abandon: status %v", st)
	}
}

func (w *worker) retry(to ids.DeviceAddress) {
	w.record("begin retry %s", to)
	sent, err := w.sender.c.RetryPendingMessages(w.ctx, to)
	if err != nil {
		fmt.Fprintf(os.Stderr, "retry %s: %v\n", to, err)
	}
	w.record("retried %s %d", to, len(sent))
}

// check compares the queue with the worker's view: every page walk and
// count must agree with what the calls reported.
func (w *worker) check() {
	got := w.walk(1 + w.rng.IntN(100))
	if len(got) != len(w.pending) {
		fail(4, "walk found %d pending, want %d", len(got), len(w.pending))
	}
	for i, m := range got {
		p, ok := w.pending[m.ID]
		if !ok || p.seq != m.Sequence || p.to != m.Recipient {
			fail(4, "walk found unexpected %s seq %d to %s", m.ID, m.Sequence, m.Recipient)
		}
		if i > 0 && got[i-1].Sequence >= m.Sequence {
			fail(4, "walk not strictly increasing at %d", m.Sequence)
		}
	}
	n, err := w.sender.c.PendingMessageCount(w.ctx, nil)
	if err != nil {
		fail(3, "count: %v", err)
	}
	if n != int64(len(w.pending)) {
		fail(4, "count %d, want %d", n, len(w.pending))
	}
}

// drain retries, delivers and acknowledges until nothing is pending: after
// all the kills, every message still pending must still be deliverable.
func (w *worker) drain() {
	for round := 0; round < 20; round++ {
		if len(w.pending) == 0 {
			w.record("drained")
			return
		}
		for _, r := range recipients {
			w.retry(r)
		}
		w.deliver()
		w.acks()
	}
	var left []string
	for id, p := range w.pending {
		left = append(left, fmt.Sprintf("%s to %s (seq %d)", id, p.to, p.seq))
	}
	slices.Sort(left)
	out := bufio.NewWriter(os.Stderr)
	fmt.Fprintf(out, "crashworker: %d messages still pending after 20 rounds:\n", len(left))
	for _, l := range left {
		fmt.Fprintln(out, "  "+l)
	}
	out.Flush()
	os.Exit(5)
}
