package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"time"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/benchpeers"
	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// fanoutDevices is the number of devices the fan-out line sends to.
const fanoutDevices = 5

// fanoutLines is the table's fan-out line (see fanoutBench), on a
// database of the mid size.
func fanoutLines(b *bench) ([]result, error) {
	var rs []result
	err := fanoutBench(b.ctx, b.dir, b.o.Mid, b.o.DMLIters, func(r ...result) { rs = append(rs, r...) })
	return rs, err
}

// fanoutBench times one logical message to the fanoutDevices devices of
// one user, all with established sessions, as one
// client.Client.SendToDevices (every pending row and session in one
// transaction, then the hand-offs) against as many client.Client.Send calls
// (one transaction each), on a database of its own seeded with pending
// messages, and beside them the two sides' raw floor: one transaction of a
// pending row and a session upsert per device against one transaction per
// device, the same generated statements and sealed values of the same sizes
// on the store's connection (see fanoutFloor). The four sides run in a
// shuffled order in each of iters rounds. It adds three lines: the
// library's speed-up (5 Sends / one SendToDevices) and the floor's, for
// information, and the library's speed-up over the floor's, target >= 0.8:
// what one transaction saves is the commit (its fsync above all), so the
// speed-up the floor allows is set by the disk, and the library is held to
// keeping most of it, whatever the disk.
func fanoutBench(ctx context.Context, dir string, pending, iters int, add func(...result)) error {
	keys, err := benchseed.NewKeyring()
	if err != nil {
		return err
	}
	cfg := benchseed.Config{N: pending}.Normalized()
	s, err := benchseed.Open(ctx, filepath.Join(dir, "fanout.db"), keys, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	net := transporttest.NewNetwork()
	c, err := client.Open(context.Background(), client.Config{Store: s, Transport: net, Directory: net})
	if err != nil {
		return err
	}
	if err := c.Initialize(ctx, store.DeviceAddress{UserID: "bench-self", DeviceID: 1}); err != nil {
		return err
	}
	peers, err := benchpeers.Establish(ctx, c, net, "bench-user", fanoutDevices)
	if err != nil {
		return err
	}
	floor, err := newFanoutFloor(ctx, sqliteaccess.DB(s), keys, peers.Addrs)
	if err != nil {
		return err
	}
	pt := benchseed.Plaintext(0, benchseed.DefaultPlaintextSize)
	fan := func(int) error {
		_, err := c.SendToDevices(ctx, peers.Addrs, store.NewLogicalMessageID(), pt)
		return err // nil only if every device's hand-off succeeded
	}
	singles := func(int) error {
		for _, to := range peers.Addrs {
			if _, err := c.Send(ctx, to, pt); err != nil {
				return err
			}
		}
		return nil
	}
	sides := []func(int) (time.Duration, error){timedAt(singles), timedAt(fan), floor.side(pt, false), floor.side(pt, true)}
	got, err := shuffled(iters, rand.New(rand.NewPCG(uint64(iters), fanoutDevices)), func(r int) error {
		if r%50 != 0 { // keep the in-process mailboxes and call log small, untimed
			return nil
		}
		err := peers.Drain(ctx)
		runtime.GC()
		return err
	}, sides...)
	if err != nil {
		return err
	}
	ss, sf, fs, ff := got[0], got[1], got[2], got[3]
	lib := ratioGE(fmt.Sprintf("fan-out to %d devices: %d Sends / one SendToDevices (time)", fanoutDevices, fanoutDevices), ss, sf, 0,
		fmt.Sprintf(" (singles vs fan-out); established sessions, %s pending, one tx vs %d", human(pending), fanoutDevices))
	raw := ratioGE(fmt.Sprintf("floor: %d raw txs / one raw tx of %d rows and %d sessions (time)", fanoutDevices, fanoutDevices, fanoutDevices), fs, ff, 0,
		" (a tx per device vs one); the same generated INSERT and session upsert, sealed values of the same sizes, on the store's connection")
	lib.Info, lib.Target, raw.Info, raw.Target = true, "-", true, "-"
	r := lib.Measured / raw.Measured
	add(lib, raw, result{
		Name:     fmt.Sprintf("fan-out to %d devices: its speed-up / its raw floor's", fanoutDevices),
		Measured: r, Unit: "x", Target: ">= 0.8", Pass: r >= 0.8,
		Detail: fmt.Sprintf("%.2fx vs %.2fx (library vs floor, the two lines above, measured side by side)", lib.Measured, raw.Measured),
	})
	return nil
}

// fanoutFloor is the raw floor of a fan-out: for each device a pending row
// and a session upsert through the generated statements on the store's
// connection, with sealed values of the sizes the library writes. It
// writes to devices of a user of its own, so the client's rows and
// sessions are left alone.
type fanoutFloor struct {
	conn     *sql.DB
	keys     *seal.Keyring
	to       []store.DeviceAddress
	sessions [][]byte // each device's sealed session, as the library stores it
}

// newFanoutFloor copies the sessions the store holds for addrs (opened,
// then sealed for the floor's devices) and returns the floor.
func newFanoutFloor(ctx context.Context, conn *sql.DB, keys *seal.Keyring, addrs []store.DeviceAddress) (*fanoutFloor, error) {
	f := &fanoutFloor{conn: conn, keys: keys}
	q := db.New(conn)
	for _, a := range addrs {
		sealed, err := q.GetSession(ctx, db.GetSessionParams{UserID: a.UserID, DeviceID: a.DeviceID})
		if err != nil {
			return nil, fmt.Errorf("session of %s: %w", a, err)
		}
		pt, err := keys.Open(seal.RecordSession, seal.AddressAD(a.UserID, a.DeviceID), sealed)
		if err != nil {
			return nil, fmt.Errorf("session of %s: %w", a, err)
		}
		to := store.DeviceAddress{UserID: "bench-floor", DeviceID: a.DeviceID}
		if sealed, err = keys.Seal(seal.RecordSession, seal.AddressAD(to.UserID, to.DeviceID), pt); err != nil {
			return nil, err
		}
		f.to, f.sessions = append(f.to, to), append(f.sessions, sealed)
	}
	return f, nil
}

// side returns the floor of one round: every device's row and session in
// one transaction if one is set, else a transaction per device. The
// pending rows are sealed untimed, each under a new logical id.
func (f *fanoutFloor) side(pt []byte, one bool) func(int) (time.Duration, error) {
	return func(int) (time.Duration, error) {
		id := store.NewLogicalMessageID()
		msgs := make([][]byte, len(f.to))
		for i, to := range f.to {
			var err error
			if msgs[i], err = benchseed.SealRow(f.keys, to, id, pt); err != nil {
				return 0, err
			}
		}
		write := func(tx *sql.Tx, i int) error {
			q := db.New(tx)
			if _, err := q.InsertPendingOutbound(context.Background(), db.InsertPendingOutboundParams{
				RecipientUserID: f.to[i].UserID, RecipientDeviceID: f.to[i].DeviceID, LogicalID: id[:], Sealed: msgs[i],
			}); err != nil {
				return err
			}
			_, err := q.UpsertSession(context.Background(), db.UpsertSessionParams{UserID: f.to[i].UserID, DeviceID: f.to[i].DeviceID, Sealed: f.sessions[i]})
			return err
		}
		return timed(func() error {
			ctx := context.Background()
			if one {
				return sqltx.Run(ctx, f.conn, func(tx *sql.Tx) error {
					for i := range f.to {
						if err := write(tx, i); err != nil {
							return err
						}
					}
					return nil
				})
			}
			for i := range f.to {
				if err := sqltx.Run(ctx, f.conn, func(tx *sql.Tx) error { return write(tx, i) }); err != nil {
					return err
				}
			}
			return nil
		})
	}
}
