// Command crashworker is the process the crash test (reliability/crash_test.go)
// kills with SIGKILL at random moments. It runs a sender client on a SQLite
// file and two recipient clients (each on its own SQLite file) over an
// in-process transport, and performs random sends, ACK deliveries, abandons,
// retries and page checks. The recipients act as applications do: each
// message received is handed to the application, which finalizes it,
// discards it, or leaves it pending inbound for the next start, when the
// walk of the pending inbound queue hands it over again. The sender acts
// as a crash-safe application does: it chooses each message's id before
// any storage, journals it, then sends with client.Client.SendWithID; on
// every start, if the journal ends with a send that has no result, it
// sends that message again under the same id (its body regenerated from
// the id) before anything else.
//
// Journal protocol (one line per record, each line fsynced):
//
//	begin <op> ...                    written before a call that may change the sender's pending queue
//	begin send <recipient> <hw> <id> <sha>  before SendWithID under an id chosen before any storage
//	sent <recipient> <id> <seq> <sha> <again>  written after SendWithID returned (the message is pending)
//	begin resend <recipient> <hw> <id> <sha>  at the start, when the journal ends with an unfinished send
//	resent <recipient> <id> <seq> <sha> <again>  SendWithID of the resend returned
//	senderr                           SendWithID returned without storing the message
//	acked <id>                        Receive of an ACK returned cleared=true
//	ackmiss <id>                      Receive of an ACK returned cleared=false
//	recverr                           Receive of an envelope returned an error
//	abandoned <id>                    AbandonPending returned Abandoned
//	notpending <id>                   AbandonPending returned NotPending
//	retried <recipient> <n>           RetryPendingMessages returned
//	begin rotate <gen>                written before the sender's RotateKey to key generation gen
//	rotated <gen>                     RotateKey returned: every sealed value is under key gen
//	drained                           (-drain) nothing is pending any more
//	begin take <recipient>            written before a recipient's Receive of one envelope
//	got <recipient> <id> <seq> <sha>  the application got a message (Receive, or the start walk)
//	taken                             Receive gave no message (a duplicate, an ACK, an error)
//	begin finalize <recipient> <id> <seq>  (or discard) before FinalizeInbound (DiscardInbound)
//	finalized <id>                    FinalizeInbound returned Finalized
//	discarded <id>                    DiscardInbound returned Discarded
//	innotpending <id>                 either returned NotPendingInbound
//
// With -legacy FILE the worker only opens FILE, a database in the legacy
// plaintext layout, with the store (which seals it in batches and erases
// the plaintext), printing "progress <phase> <sealed> <total>" on stdout
// after every step Open reports and "opened <rows>" at the end; the crash
// test kills it in the middle.
//
// A record is written only after the call it describes has returned, so a
// "begin" without its result is the one operation the kill interrupted.
//
// Key generations: the sender's storage key starts as -key (generation 0)
// and each rotation moves it to the next generation (rotationKey). -keygen
// says which generation the sender's database is under; -rotating says a
// rotation to the next one was interrupted, which the worker finishes
// right after opening the sender's store, before anything else writes.
//
// -target makes the worker, once ready, prepare what one kind of operation
// needs (pending messages, ACKs in the mailbox), print "armed", and then
// repeat that operation until it is killed: the crash test uses it to
// spread the operation in flight at the kill over send, ACK (recv),
// abandon, retry, rotate and the recipients' receive, finalize and
// discard (inbound).
//
// Exit codes: 0 done, 2 usage or setup failure, 3 an operation failed in a
// way it must not, 4 a self-check found the queue differing from the
// journal, 5 -drain could not empty the queue.
package main

import (
	"bufio"
	"bytes"
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
	"strings"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
	"github.com/securemsg/storage/transport/transporttest"
)

// Addresses of the three devices; the crash test uses the same ones.
var (
	senderAddr = store.DeviceAddress{UserID: "alice", DeviceID: 1}
	recipients = []store.DeviceAddress{{UserID: "bob", DeviceID: 1}, {UserID: "carol", DeviceID: 7}}
)

type device struct {
	addr  store.DeviceAddress
	store *sqlitestore.Store
	c     *client.Client
}

type pendingMsg struct {
	to  store.DeviceAddress
	seq int64
}

type worker struct {
	secret  []byte
	gen     int // the sender's key generation
	ctx     context.Context
	rng     *rand.Rand
	journal *os.File
	net     *transporttest.Network
	sender  device
	rcpts   []device
	pending map[store.LogicalMessageID]pendingMsg
	gone    []store.LogicalMessageID // acked or abandoned, for NotPending abandons
	// keep is whether the recipients' application may leave a message
	// pending inbound for a later start (not while draining).
	keep bool
}

func main() {
	dir := flag.String("dir", "", "directory holding the database files")
	journalPath := flag.String("journal", "", "journal file (appended)")
	keyHex := flag.String("key", "", "storage key, hex (32 bytes)")
	seed := flag.Uint64("seed", 1, "random seed")
	ops := flag.Int("ops", 0, "stop after this many operations (0: run until killed)")
	drain := flag.Bool("drain", false, "deliver, acknowledge and retry until nothing is pending, then exit")
	target := flag.String("target", "", "after ready: repeat one operation (send, recv, abandon, retry, rotate, inbound) until killed")
	keyGen := flag.Int("keygen", 0, "the sender's key generation")
	rotating := flag.Bool("rotating", false, "a rotation of the sender's key to generation keygen+1 was interrupted: finish it first")
	legacyDB := flag.String("legacy", "", "open this legacy plaintext database (sealing it), then exit")
	batch := flag.Int("batch", 0, "with -legacy: rows sealed per transaction (0: the default)")
	flag.Parse()
	if *legacyDB != "" {
		openLegacy(*legacyDB, *keyHex, *batch)
		return
	}
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
		net:     transporttest.NewNetwork(),
		pending: map[store.LogicalMessageID]pendingMsg{},
		keep:    !*drain,
	}
	w.secret, w.gen = secret, *keyGen
	// Read before anything is journaled (the rotation resumed at open
	// journals).
	resendTo, resendID, resend := unfinishedSend(*journalPath)
	senderKeys := keyring(rotationKey(secret, w.gen))
	if *rotating {
		senderKeys.Add(rotationKey(secret, w.gen+1))
	}
	w.sender = w.open(*dir, "sender.db", senderAddr, senderKeys, *rotating)
	for i, a := range recipients {
		w.rcpts = append(w.rcpts, w.open(*dir, fmt.Sprintf("recipient%d.db", i+1), a, keyring(key), false))
	}
	w.load()
	// The sender's start: the send the kill interrupted is sent again,
	// under its id, first.
	if resend {
		w.sendKeyed("resend", "resent", resendTo, resendID)
	}
	fmt.Println("ready")
	// The recipients' start loop: every message not finalized or discarded
	// is handed to the application again.
	for _, r := range w.rcpts {
		w.inbound(r)
	}

	if *drain {
		w.drain()
		return
	}
	if *target != "" {
		w.targeted(*target)
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

func keyring(k seal.Key) *seal.Keyring {
	kr, err := seal.NewKeyring(k)
	if err != nil {
		fail(2, "keyring: %v", err)
	}
	return kr
}

// rotationKey is the sender's storage key of generation gen: the -key
// secret itself for 0, then keys derived from it. The crash test derives
// the same ones.
func rotationKey(secret []byte, gen int) seal.Key {
	if gen == 0 {
		k, err := seal.NewKey(secret)
		if err != nil {
			fail(2, "key: %v", err)
		}
		return k
	}
	sum := sha256.Sum256(append([]byte(fmt.Sprintf("crash test rotation key %d:", gen)), secret...))
	k, err := seal.NewKey(sum[:])
	if err != nil {
		fail(2, "key: %v", err)
	}
	return k
}

// rotationBatch is small so that a rotation commits many times and kills
// land inside it.
const rotationBatch = 2

// open reopens (or creates) a device's store and client, and publishes its
// bundle on this process's network. With resume, it first finishes the
// interrupted rotation of the store's key to keys' current key.
func (w *worker) open(dir, file string, addr store.DeviceAddress, keys *seal.Keyring, resume bool) device {
	s, err := sqlitestore.Open(w.ctx, filepath.Join(dir, file), keys)
	if err != nil {
		fail(2, "open %s: %v", file, err)
	}
	if resume {
		w.rotate(s)
	}
	c, err := client.Open(w.ctx, client.Config{Store: s, Transport: w.net, Directory: w.net})
	if err != nil {
		fail(2, "client open %s: %v", file, err)
	}
	// Initialize creates the identity the first time; the bundle is
	// published again after a restart (the in-process directory is gone).
	if err := c.Initialize(w.ctx, addr); err != nil {
		fail(2, "initialize %s: %v", file, err)
	}
	if err := c.PublishBundle(w.ctx); err != nil {
		fail(2, "publish %s: %v", file, err)
	}
	return device{addr: addr, store: s, c: c}
}

// rotate rotates the sender's storage key to the next generation (or
// finishes the interrupted rotation to it).
func (w *worker) rotate(s *sqlitestore.Store) {
	next := w.gen + 1
	w.record("begin rotate %d", next)
	if err := s.RotateKey(w.ctx, rotationKey(w.secret, next), rotationBatch, nil); err != nil {
		fail(3, "rotate to generation %d: %v", next, err)
	}
	w.gen = next
	w.record("rotated %d", next)
}

// load reads the sender's pending queue, the worker's view of it.
func (w *worker) load() {
	for _, m := range w.walk(100) {
		w.pending[m.ID] = pendingMsg{to: m.Recipient, seq: m.Sequence}
	}
}

func (w *worker) walk(limit int) []store.PendingMessage {
	var out []store.PendingMessage
	var after *int64
	for {
		p, err := w.sender.c.PendingMessages(w.ctx, store.PageRequest{After: after, Limit: limit})
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
	case r < 85:
		w.abandon()
	case r < 92:
		w.retry(recipients[w.rng.IntN(len(recipients))])
	case r < 95:
		w.inbound(w.rcpts[w.rng.IntN(len(w.rcpts))])
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

// bodyFor is the plaintext of the message under id: the sender's
// application regenerates it from the id alone (16 to 615 bytes, expanded
// from the id with SHA-256), so that a resend after a restart sends the
// very message the interrupted send was sending.
func bodyFor(id store.LogicalMessageID) []byte {
	body := make([]byte, 0, 16+(int(id[0])|int(id[1])<<8)%600)
	for block := 0; len(body) < cap(body); block++ {
		sum := sha256.Sum256(append(id[:], byte(block), byte(block>>8)))
		body = append(body, sum[:min(len(sum), cap(body)-len(body))]...)
	}
	return body
}

// send is the sender's application sending a new message keyed by its own
// id: it chooses the id before any storage and journals it (its "outbox")
// with the high-water mark, then sends under it.
func (w *worker) send(to store.DeviceAddress) {
	w.sendKeyed("send", "sent", to, store.NewLogicalMessageID())
}

// sendKeyed journals "begin <verb> <to> <hw> <id> <digest>", sends the
// message under id with SendWithID and journals "<done> <to> <id> <seq>
// <digest> <again>" (or "senderr").
func (w *worker) sendKeyed(verb, done string, to store.DeviceAddress, id store.LogicalMessageID) {
	hw, err := sqliteaccess.SequenceHighWater(w.ctx, w.sender.store)
	if err != nil {
		fail(3, "high-water mark: %v", err)
	}
	body := bodyFor(id)
	w.record("begin %s %s %d %s %s", verb, to, hw, id, digest(body))
	again, err := w.sender.c.SendWithID(w.ctx, to, id, body)
	if err != nil && !errors.Is(err, client.ErrMessageNotSent) {
		// Not stored: nothing to record but the failure.
		fmt.Fprintf(os.Stderr, "%s: %v\n", verb, err)
		w.record("senderr")
		return
	}
	prev, pending := w.pending[id]
	if again != (pending && prev.to == to) {
		fail(4, "%s %s to %s: again %v, but pending per the queue: %v", verb, id, to, again, pending)
	}
	var m store.PendingMessage
	if again {
		// A retry of the pending row: it keeps its sequence.
		for _, p := range w.walk(100) {
			if p.ID == id && p.Recipient == to {
				m = p
			}
		}
		if m.Sequence != prev.seq {
			fail(4, "%s %s again: pending at sequence %d, want %d", verb, id, m.Sequence, prev.seq)
		}
	} else {
		// Find its sequence: the first pending message to `to` after the
		// high-water mark read before the send (nothing else runs
		// meanwhile).
		p, perr := w.sender.c.PendingMessages(w.ctx, store.PageRequest{After: &hw, Limit: 1, Recipient: &to})
		if perr != nil {
			fail(3, "page after %s: %v", verb, perr)
		}
		if len(p.Messages) != 1 || p.Messages[0].ID != id {
			fail(4, "%s %s (err %v) but the page after %d holds %v", verb, id, err, hw, p.Messages)
		}
		m = p.Messages[0]
	}
	if !slices.Equal(m.Plaintext, body) {
		fail(4, "pending %s opens to another plaintext", id)
	}
	w.pending[id] = pendingMsg{to: to, seq: m.Sequence}
	w.record("%s %s %s %d %s %v", done, to, id, m.Sequence, digest(body), again)
}

// unfinishedSend reads the journal back and returns the send its last line
// begun, if that send has no result: the kill interrupted it, at any
// instant (before the commit, between the commit and the hand-off, after
// the hand-off). A partial last line (the kill cut the write) is ignored.
func unfinishedSend(path string) (to store.DeviceAddress, id store.LogicalMessageID, ok bool) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return to, id, false
	}
	if err != nil {
		fail(2, "journal: %v", err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 6 || f[0] != "begin" || (f[1] != "send" && f[1] != "resend") {
		return to, id, false
	}
	for _, a := range recipients {
		if a.String() == f[2] {
			to, ok = a, true
		}
	}
	id, err = store.ParseLogicalMessageIDString(f[4])
	if err != nil || !ok {
		fail(2, "journal: unfinished send %q: %v", lines[len(lines)-1], err)
	}
	return to, id, true
}

// deliver lets every recipient receive its mailbox, one journaled call per
// envelope, and hand each message to the application. It does not touch
// the sender's queue.
func (w *worker) deliver() {
	for _, r := range w.rcpts {
		envs, err := w.net.Receive(w.ctx, r.addr)
		if err != nil {
			fail(3, "transport receive: %v", err)
		}
		for _, raw := range envs {
			w.record("begin take %s", r.addr)
			res, err := r.c.Receive(w.ctx, raw)
			if err != nil {
				fmt.Fprintf(os.Stderr, "recipient %s: receive: %v\n", r.addr, err)
			}
			m, ok := res.(*client.Message)
			if err != nil || !ok {
				w.record("taken")
				continue
			}
			w.record("got %s %s %d %s", r.addr, m.ID, m.Sequence, digest(m.Plaintext))
			w.handle(r, m.ID, m.Sequence)
		}
	}
}

// inbound is a recipient's start loop: the walk of its pending inbound
// queue hands every message to the application again.
func (w *worker) inbound(r device) {
	for m, err := range r.c.AllPendingInbound(w.ctx, nil) {
		if err != nil {
			fail(3, "recipient %s: pending inbound: %v", r.addr, err)
		}
		w.record("got %s %s %d %s", r.addr, m.ID, m.Sequence, digest(m.Plaintext))
		w.handle(r, m.ID, m.Sequence)
	}
}

// handle is the recipients' application: it finalizes most messages it
// gets, discards some and leaves some pending inbound for a later start.
func (w *worker) handle(r device, id store.LogicalMessageID, seq int64) {
	x := w.rng.IntN(10)
	if x >= 8 && w.keep {
		return
	}
	verb, remove := "finalize", r.c.FinalizeInbound
	if x == 7 {
		verb, remove = "discard", r.c.DiscardInbound
	}
	w.record("begin %s %s %s %d", verb, r.addr, id, seq)
	out, err := remove(w.ctx, seq)
	if err != nil {
		fail(3, "recipient %s: %s %s: %v", r.addr, verb, id, err)
	}
	switch out.Status {
	case client.Finalized:
		w.record("finalized %s", id)
	case client.Discarded:
		w.record("discarded %s", id)
	case client.NotPendingInbound:
		w.record("innotpending %s", id)
	default:
		fail(3, "recipient %s: %s: status %v", r.addr, verb, out.Status)
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
		to store.DeviceAddress
		id store.LogicalMessageID
	)
	switch r := w.rng.IntN(10); {
	case r < 7 && len(w.pending) > 0:
		keys := make([]store.LogicalMessageID, 0, len(w.pending))
		for k := range w.pending {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b store.LogicalMessageID) int { return slices.Compare(a[:], b[:]) })
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
		id = store.NewLogicalMessageID()
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

func (w *worker) retry(to store.DeviceAddress) {
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
			for _, r := range w.rcpts {
				if n, err := r.c.PendingInboundCount(w.ctx, nil); err != nil || n != 0 {
					fail(5, "recipient %s: %d pending inbound after the drain (%v)", r.addr, n, err)
				}
			}
			w.record("drained")
			return
		}
		for _, r := range recipients {
			w.retry(r)
		}
		w.deliver()
		w.acks()
	}
	for _, r := range w.rcpts {
		w.inbound(r)
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

// openLegacy opens a legacy plaintext database with the store, reporting
// the migration's progress on stdout.
func openLegacy(path, keyHex string, batch int) {
	secret, err := hex.DecodeString(keyHex)
	if err != nil {
		fail(2, "key: %v", err)
	}
	key, err := seal.NewKey(secret)
	if err != nil {
		fail(2, "key: %v", err)
	}
	keys, err := seal.NewKeyring(key)
	if err != nil {
		fail(2, "keyring: %v", err)
	}
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path, keys, sqlitestore.WithLegacyUpgrade(), sqlitestore.WithLegacyBatch(batch),
		sqlitestore.WithLegacyProgress(func(p store.LegacyProgress) { fmt.Printf("progress %s %d %d\n", p.Phase, p.Sealed, p.Total) }))
	if err != nil {
		fail(3, "open %s: %v", path, err)
	}
	n, err := s.PendingMessageCount(ctx, nil)
	if err != nil {
		fail(3, "count: %v", err)
	}
	if err := s.Close(); err != nil {
		fail(3, "close: %v", err)
	}
	fmt.Printf("opened %d\n", n)
}

// armedWindow bounds how many operations a targeted run performs before it
// prepares again; the crash test kills within a few tens of milliseconds
// of "armed" anyway.
const armedWindow = 400

// targeted prepares what op needs, prints "armed", and repeats op until
// killed (preparing again when the preparation is used up).
func (w *worker) targeted(op string) {
	armed := false
	arm := func() {
		if !armed {
			fmt.Println("armed")
			armed = true
		}
	}
	for {
		switch op {
		case "send":
			w.trimTo(150, 100)
			arm()
			for range armedWindow {
				w.send(recipients[w.rng.IntN(len(recipients))])
				if len(w.pending) > 300 {
					break
				}
			}
		case "recv":
			// Fresh messages, delivered: their ACKs wait in the sender's
			// mailbox.
			w.trimTo(150, 100)
			for range 40 {
				w.send(recipients[w.rng.IntN(len(recipients))])
			}
			w.deliver()
			arm()
			w.acks()
		case "abandon":
			w.fillTo(60)
			arm()
			for range armedWindow {
				w.abandon()
				if len(w.pending) == 0 {
					break
				}
			}
		case "retry":
			w.fillTo(40)
			arm()
			for range armedWindow {
				w.retry(recipients[w.rng.IntN(len(recipients))])
			}
		case "rotate":
			w.fillTo(30)
			arm()
			w.rotate(w.sender.store)
		case "inbound":
			// Fresh messages in the recipients' mailboxes: the kill lands
			// in their receive, finalize or discard.
			w.trimTo(150, 100)
			for range 40 {
				w.send(recipients[w.rng.IntN(len(recipients))])
			}
			arm()
			w.deliver()
		default:
			fail(2, "unknown -target %q", op)
		}
	}
}

// fillTo sends until at least n messages are pending.
func (w *worker) fillTo(n int) {
	for len(w.pending) < n {
		w.send(recipients[w.rng.IntN(len(recipients))])
	}
}

// trimTo abandons pending messages down to to if more than above are
// pending, so that targeted sends do not grow the queue without bound.
func (w *worker) trimTo(above, to int) {
	if len(w.pending) <= above {
		return
	}
	for len(w.pending) > to {
		var (
			id store.LogicalMessageID
			p  pendingMsg
		)
		for id, p = range w.pending {
			break
		}
		w.record("begin abandon %s %s", p.to, id)
		st, err := w.sender.c.AbandonPending(w.ctx, p.to, id)
		if err != nil || st != client.Abandoned {
			fail(4, "trim: abandon of pending %s: %v %v", id, st, err)
		}
		delete(w.pending, id)
		w.gone = append(w.gone, id)
		w.record("abandoned %s", id)
	}
}
