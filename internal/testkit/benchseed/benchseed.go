// Package benchseed builds the databases the pending-outbound benchmarks
// measure: cmd/pendingbench and the go test benchmarks of
// store/sqlitestore and client share it.
//
// A seeded database holds N pending messages over a number of recipients,
// in one of two layouts (see Layout). The even layout gives recipient 0
// (Filtered) its own share (DefaultShare: at least 200, so that a page of
// 100 plus its probe row exists in every database, and its fair share
// N/recipients at large N), spread evenly over the sequence, and the other
// messages round-robin to recipients 1..recipients-1. The skewed layout
// (Config.Skew) gives recipient r a share proportional to (r+1)^-Skew,
// scattered over the whole sequence: some recipients hold a dozen
// messages, some hundreds of thousands.
//
// Rows are deterministic: row i (0-based) is for Layout.Row(i) and, seeded
// into an empty table, gets sequence i+1, so benchmarks can name victims
// and cursor positions without reading the database. Every sealed value is
// a real seal record of the store's keyring bound to seal.MessageAD, so
// the store's pages open it. Seeding writes through the sqlc-generated
// InsertPendingOutbound inside large transactions, on a raw connection
// opened with sqliteaccess.DSN after sqlitestore.Open has migrated the file.
//
// Package benchseed is benchmark tooling: it is not used by the client.
package benchseed

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/store/sqlitestore"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
)

// DefaultSkew is the skew the benchmarks seed with (Config.Skew): at
// 1,000,000 rows over 1,000 recipients the largest holds ~390,000 and
// the median a few dozen, as a user's queue is spread.
const DefaultSkew = 1.5

// Defaults used when a Config field is zero.
const (
	DefaultRecipients    = 1000
	DefaultPlaintextSize = 200
	DefaultBatchSize     = 100_000
	// MinShare is the least number of messages the filtered recipient
	// holds: two full pages plus probe rows.
	MinShare = 2 * store.MaxPageSize
)

// Config describes one seeded database.
type Config struct {
	// N is the number of pending messages.
	N int
	// Recipients is the number of distinct recipients; zero means
	// DefaultRecipients. Recipient 0 is Filtered.
	Recipients int
	// Share is the number of messages for Filtered; zero means
	// DefaultShare(N, Recipients). It is capped at N.
	Share int
	// PlaintextSize is the plaintext length of every message; zero means
	// DefaultPlaintextSize.
	PlaintextSize int
	// BatchSize is the number of rows per seeding transaction; zero means
	// DefaultBatchSize.
	BatchSize int
	// Skew, when positive, replaces the even layout by a skewed one (see
	// Layout): recipient r holds a share proportional to (r+1)^-Skew, so
	// that a few recipients hold most messages and most hold a handful.
	// Share and Filtered then mean nothing; use the Layout.
	Skew float64
	// Scatter, with Skew, gives the shares to the recipients' addresses in
	// a fixed pseudo-random order instead of the largest first, so that
	// recipients holding many messages sit anywhere in address order, as
	// a user's contacts do.
	Scatter bool
}

// DefaultShare is the filtered recipient's share of n messages over
// recipients: its fair share n/recipients, but at least MinShare (so 200
// of 1,000 and 1,000 of 1,000,000 over 1,000 recipients), at most n.
func DefaultShare(n, recipients int) int {
	s := max(n/max(recipients, 1), MinShare)
	return min(s, n)
}

// Normalized returns c with every zero field set to its default, and
// Share at most N (all of N with one recipient).
func (c Config) Normalized() Config {
	if c.Recipients <= 0 {
		c.Recipients = DefaultRecipients
	}
	if c.Share <= 0 {
		c.Share = DefaultShare(c.N, c.Recipients)
	}
	c.Share = min(c.Share, c.N)
	if c.Recipients == 1 {
		c.Share = c.N
	}
	if c.PlaintextSize <= 0 {
		c.PlaintextSize = DefaultPlaintextSize
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	return c
}

// Recipient returns the address of recipient r.
func Recipient(r int) store.DeviceAddress {
	return store.DeviceAddress{UserID: fmt.Sprintf("bench-user-%06d", r), DeviceID: 1}
}

// Filtered is the recipient with its own share: Recipient(0).
func Filtered() store.DeviceAddress { return Recipient(0) }

// isFiltered reports whether row i belongs to the filtered recipient: the
// Share rows are spread evenly over 0..N-1.
func (c Config) isFiltered(i int) bool {
	return (i*c.Share)/c.N != ((i+1)*c.Share)/c.N
}

// filteredBefore is the number of filtered rows among rows 0..i-1.
func (c Config) filteredBefore(i int) int { return (i*c.Share + c.N - 1) / c.N }

// RowID is the logical id of row i.
func RowID(i int) store.LogicalMessageID {
	var id store.LogicalMessageID
	copy(id[:8], "pendseed")
	binary.BigEndian.PutUint64(id[8:], uint64(i))
	return id
}

// Row returns the recipient and logical id of row i (0-based) of the even
// layout (Skew zero), which has sequence i+1 in a freshly seeded
// database. Config must be Normalized.
func (c Config) Row(i int) (store.DeviceAddress, store.LogicalMessageID) {
	id := RowID(i)
	if c.Recipients == 1 || c.isFiltered(i) {
		return Filtered(), id
	}
	other := i - c.filteredBefore(i) // index among non-filtered rows
	return Recipient(1 + other%(c.Recipients-1)), id
}

// FilteredRow returns the row index of the filtered recipient's k-th
// message (0-based, k < Share). Config must be Normalized.
func (c Config) FilteredRow(k int) int {
	// smallest i with floor((i+1)*Share/N) > k
	i := ((k+1)*c.N + c.Share - 1) / c.Share
	return i - 1
}

// Plaintext returns the plaintext of row i: size bytes of readable text.
func Plaintext(i, size int) []byte {
	out := make([]byte, 0, size)
	line := fmt.Appendf(nil, "pending message %d, sealed at rest until acknowledged. ", i)
	for len(out) < size {
		out = append(out, line[:min(len(line), size-len(out))]...)
	}
	return out
}

// SealRow seals plaintext as a pending outbound record of keys for
// (recipient, id), exactly as the store does.
func SealRow(keys seal.Sealer, recipient store.DeviceAddress, id store.LogicalMessageID, plaintext []byte) ([]byte, error) {
	return keys.Seal(seal.RecordPendingOutbound, seal.MessageAD(recipient.UserID, recipient.DeviceID, id), plaintext)
}

type batch struct {
	rows []db.InsertPendingOutboundParams
	err  error
}

// Seed inserts cfg.N pending messages (rows 0..N-1) into the empty pending
// table of conn, sealed with keys, in transactions of cfg.BatchSize rows,
// and checks that row i got sequence i+1. Sealing runs on the other cores
// while rows are inserted.
func Seed(ctx context.Context, conn *sql.DB, keys seal.Sealer, cfg Config) error {
	cfg = cfg.Normalized()
	if cfg.N <= 0 {
		return nil
	}
	return SeedLayout(ctx, conn, keys, cfg.Layout())
}

// SeedLayout is Seed for the rows of l.
func SeedLayout(ctx context.Context, conn *sql.DB, keys seal.Sealer, l *Layout) error {
	cfg := l.cfg
	if cfg.N <= 0 {
		return nil
	}
	n, err := db.New(conn).CountPendingOutbound(ctx)
	if err != nil {
		return fmt.Errorf("benchseed: %w", err)
	}
	if n != 0 {
		return fmt.Errorf("benchseed: pending table holds %d rows, want an empty one", n)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Sealers fill chunks of rows; chunks are inserted in order.
	const chunk = 2000
	nChunks := (cfg.N + chunk - 1) / chunk
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	results := make([]chan batch, nChunks)
	for i := range results {
		results[i] = make(chan batch, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				lo, hi := c*chunk, min((c+1)*chunk, cfg.N)
				b := batch{rows: make([]db.InsertPendingOutboundParams, 0, hi-lo)}
				for i := lo; i < hi; i++ {
					r, id := l.Row(i)
					sealed, err := SealRow(keys, r, id, Plaintext(i, cfg.PlaintextSize))
					if err != nil {
						b.err = err
						break
					}
					b.rows = append(b.rows, db.InsertPendingOutboundParams{
						RecipientUserID: r.UserID, RecipientDeviceID: r.DeviceID, LogicalID: id[:], Sealed: sealed,
					})
				}
				results[c] <- b
			}
		}()
	}
	// Feed at most a few chunks ahead of the inserter to bound memory.
	ahead := make(chan struct{}, 4*workers)
	go func() {
		defer close(next)
		for c := range nChunks {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer wg.Wait()
	defer cancel()

	row := 0
	pending := make([]db.InsertPendingOutboundParams, 0, cfg.BatchSize)
	// flush inserts the rows collected so far in one transaction, through
	// the project's one transaction helper.
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
			q := db.New(tx)
			for _, p := range pending {
				seq, err := q.InsertPendingOutbound(ctx, p)
				if err != nil {
					return fmt.Errorf("benchseed: insert row %d: %w", row, err)
				}
				if seq != int64(row)+1 {
					return fmt.Errorf("benchseed: row %d got sequence %d, want %d (table not fresh?)", row, seq, row+1)
				}
				row++
			}
			return nil
		})
		pending = pending[:0]
		return err
	}
	for c := range nChunks {
		b := <-results[c]
		<-ahead
		if b.err != nil {
			return fmt.Errorf("benchseed: seal: %w", b.err)
		}
		for _, p := range b.rows {
			pending = append(pending, p)
			if len(pending) == cfg.BatchSize {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("benchseed: checkpoint: %w", err)
	}
	return nil
}

// Open opens (creating and migrating) the store at path with keys, then
// seeds it with cfg through a separate raw connection on the same file
// (sqliteaccess.DSN, a larger page cache for the load), which it closes
// before returning. The store must be new.
func Open(ctx context.Context, path string, keys seal.RotatingSealer, cfg Config) (*sqlitestore.Store, error) {
	return OpenLayout(ctx, path, keys, cfg.Normalized().Layout())
}

// OpenLayout is Open for the rows of l.
func OpenLayout(ctx context.Context, path string, keys seal.RotatingSealer, l *Layout) (*sqlitestore.Store, error) {
	s, err := sqlitestore.Open(ctx, path, keys)
	if err != nil {
		return nil, err
	}
	raw, err := sql.Open(sqlitedriver.Name, sqliteaccess.DSN(path))
	if err != nil {
		s.Close()
		return nil, err
	}
	raw.SetMaxOpenConns(1)
	_, err = raw.ExecContext(ctx, "PRAGMA cache_size = -131072") // 128 MiB, this connection only
	if err == nil {
		err = SeedLayout(ctx, raw, keys, l)
	}
	if cerr := raw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// NewKeyring returns a keyring holding one fresh random key.
func NewKeyring() (*seal.Keyring, error) {
	k, err := seal.GenerateKey()
	if err != nil {
		return nil, err
	}
	return seal.NewKeyring(k)
}

// EnvSize returns the positive integer in the environment variable name,
// or def if it is unset or malformed. The go test benchmarks read their
// large size from LargeEnv with it.
func EnvSize(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// LargeEnv names the environment variable setting the large database size
// of the go test benchmarks (default DefaultLargeBench).
const LargeEnv = "PENDINGBENCH_LARGE"

// DefaultLargeBench is the large size the go test benchmarks use when
// LargeEnv is unset: quick enough for `go test -bench .`.
const DefaultLargeBench = 100_000

// Victims hands out existing pending messages to delete, a different one
// on each call, spread evenly over the seeded table, and puts a new
// pending message for the same recipient in place of each deleted one
// (outside the timed region), so the table keeps its size.
type Victims struct {
	cfg   Config
	slots []victim
	next  int
}

// replacements numbers replacement messages process-wide, so that several
// Victims on one database never make the same id.
var replacements atomic.Uint64

// ReplacementID returns a logical id no seeded row and no earlier call
// has: for messages put in place of deleted ones.
func ReplacementID() store.LogicalMessageID {
	var id store.LogicalMessageID
	copy(id[:8], "replaced")
	binary.BigEndian.PutUint64(id[8:], replacements.Add(1))
	return id
}

type victim struct {
	recipient store.DeviceAddress
	id        store.LogicalMessageID
	row       int
}

// NewVictims returns count victim slots spread over the rows of a database
// seeded with cfg (either layout; count is capped at cfg.N), handed out in
// a shuffled order (fixed seed), so that consecutive deletes land at
// unrelated places of the table. Once every slot was used, Next starts
// again on the replacements, which sit at the table's end: give count
// as cfg.N to keep every delete on a seeded row for as long as possible.
func NewVictims(cfg Config, count int) *Victims {
	cfg = cfg.Normalized()
	count = max(1, min(count, cfg.N))
	v := &Victims{cfg: cfg, slots: make([]victim, count)}
	// The layout, not Config.Row: a skewed database's rows belong to
	// other recipients than the even layout's.
	l := cfg.Layout()
	for j := range v.slots {
		row := j * cfg.N / count
		r, id := l.Row(row)
		v.slots[j] = victim{recipient: r, id: id, row: row}
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.N), uint64(count)))
	rng.Shuffle(len(v.slots), func(i, j int) { v.slots[i], v.slots[j] = v.slots[j], v.slots[i] })
	return v
}

// Next returns the slot and the pending message to delete next.
func (v *Victims) Next() (slot int, recipient store.DeviceAddress, id store.LogicalMessageID) {
	slot = v.next
	v.next = (v.next + 1) % len(v.slots)
	s := v.slots[slot]
	return slot, s.recipient, s.id
}

// Replace inserts, through the store p (which seals it and keeps its
// count), a new pending message for the recipient of slot, which then
// points to it.
func (v *Victims) Replace(ctx context.Context, p store.Pending, slot int) error {
	s := &v.slots[slot]
	s.id = ReplacementID()
	_, err := p.InsertPending(ctx, s.recipient, s.id, Plaintext(s.row, v.cfg.PlaintextSize))
	return err
}
