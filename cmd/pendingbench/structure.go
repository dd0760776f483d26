package main

import (
	"fmt"
	"time"

	"github.com/securemsg/storage/store/sqlitestore"
)

// openTarget is what Open may take on a warm cache at the largest size:
// every check it runs reads the schema, never the rows.
const openTarget = 50 * time.Millisecond

// structureLines time what checks the file's structure at the largest
// size: Open on a warm cache (close and open, ColdIters times; its checks
// read sqlite_master and the pragmas, so it must not grow with the rows),
// against a target; and once each, as information, the full verification
// (sqlitestore.Store.Verify: integrity_check of every table) and, for
// comparison, the two cheaper checks it was chosen over: PRAGMA
// quick_check (which counts each index's entries but compares none with
// its row) and counting the entries of each pending_outbound_message
// index against the table's rows (which catches an emptied or padded
// index, not a forged one).
func structureLines(b *bench) ([]result, error) {
	ctx, e := b.ctx, b.large
	var opens sample
	for range max(b.o.ColdIters, 1) {
		d, err := timed(func() error { return e.open(ctx) })
		if err != nil {
			return nil, err
		}
		opens = append(opens, d)
	}
	m := opens.median()
	rs := []result{{Name: fmt.Sprintf("Open and Close at %s pending, warm cache", b.L), Measured: m.Seconds(), Unit: "s",
		Target: "<= " + fmtDur(openTarget), Pass: m <= openTarget,
		Detail: fmt.Sprintf("%s; definitions and root pages from sqlite_master, no row read", opens.spread())}}

	tables := 0
	verify, err := timed(func() error {
		return e.s.Verify(ctx, func(p sqlitestore.VerifyProgress) { tables = p.Total })
	})
	if err != nil {
		return nil, err
	}
	rs = append(rs, result{Name: fmt.Sprintf("Verify at %s pending", b.L), Info: true, Measured: verify.Seconds(), Unit: "s",
		Detail: fmt.Sprintf("integrity_check of each of %d tables and their indexes: every page read", tables)})

	// The raw comparisons run on the store's own connection.
	raw := func(query string) (time.Duration, error) {
		return timed(func() error {
			rows, err := e.rawDB().QueryContext(ctx, query)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
			}
			return rows.Err()
		})
	}
	quick, err := raw("PRAGMA quick_check")
	if err != nil {
		return nil, err
	}
	rs = append(rs, result{Name: fmt.Sprintf("PRAGMA quick_check at %s pending", b.L), Info: true, Measured: quick.Seconds(), Unit: "s",
		Detail: fmt.Sprintf("%.2fx Verify's time; counts index entries, compares none with its row", quick.Seconds()/verify.Seconds())})
	counts, err := raw(`SELECT (SELECT count(*) FROM pending_outbound_message NOT INDEXED),
		(SELECT count(*) FROM pending_outbound_message INDEXED BY sqlite_autoindex_pending_outbound_message_1),
		(SELECT count(*) FROM pending_outbound_message INDEXED BY pending_outbound_message_recipient)`)
	if err != nil {
		return nil, err
	}
	rs = append(rs, result{Name: fmt.Sprintf("count rows and both index entries, pending table, at %s", b.L), Info: true, Measured: counts.Seconds(), Unit: "s",
		Detail: fmt.Sprintf("%.1fx the Open target; catches an emptied or padded index, not a forged one", counts.Seconds()/openTarget.Seconds())})
	return rs, nil
}
