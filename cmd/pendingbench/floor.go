package main

import (
	"context"
	"fmt"

	"github.com/securemsg/storage/internal/sqliteaccess"
)

// floorCacheKiB is the page cache the in-memory floor runs with: more
// than the large database, so that after the pre-read every page of it
// sits in SQLite's own cache.
const floorCacheKiB = 1 << 20 // 1 GiB, allocated only as pages are read

// floorLines measure what no connection setting can beat: the page of one
// recipient, 1M against 1k, with every page of both databases already in
// SQLite's page cache (read once through the table and the recipient
// index before timing). Whatever the ratio is here, a bigger cache or a
// memory map cannot bring the line "page of 100, one recipient" below it:
// it is what the CPU caches and the depth of the b-trees cost once the
// disk and the OS are out of the way. It is reported without a target.
func floorLines(b *bench) ([]result, error) {
	ctx, o := b.ctx, b.o
	var a, c sample
	var before, after int64
	err := inMemory(ctx, []*env{b.large, b.small}, func() error {
		before = readSyscalls()
		var err error
		a, c, err = interleave(o.Iters, b.large.pageAt(ctx, b.large.recipientCursors(b.rng, o.Iters)), b.small.pageAt(ctx, b.small.recipientCursors(b.rng, o.Iters)))
		after = readSyscalls()
		return err
	})
	if err != nil {
		return nil, err
	}
	reads := "read syscalls not counted on this system"
	if before >= 0 && after >= 0 {
		reads = fmt.Sprintf("%.1f read syscalls per page", float64(after-before)/float64(2*o.Iters))
	}
	r := ratioLE(fmt.Sprintf("floor: page of 100, one recipient, all in memory: %s / %s", b.L, b.S), a, c, 0,
		fmt.Sprintf(", every page in SQLite's cache (pre-read, %d MiB cache), %s", floorCacheKiB>>10, reads))
	r.Info, r.Target, r.Pass = true, "-", false
	return []result{r}, nil
}

// inMemory runs fn with every page of every database of envs in its
// connection's page cache (preRead), and gives the memory back after it,
// whatever happens.
func inMemory(ctx context.Context, envs []*env, fn func() error) error {
	defer func() {
		for _, e := range envs {
			_ = e.restoreCache(ctx)
		}
	}()
	for _, e := range envs {
		if err := e.preRead(ctx); err != nil {
			return err
		}
	}
	return fn()
}

// preRead raises e's page cache to floorCacheKiB and reads every page of
// the pending table and of its recipient index into it.
func (e *env) preRead(ctx context.Context) error {
	conn := e.rawDB()
	for _, q := range []string{
		fmt.Sprintf("PRAGMA cache_size = -%d", floorCacheKiB),
		"SELECT sum(length(sealed)) FROM pending_outbound_message",
		"SELECT sum(recipient_device_id) FROM pending_outbound_message INDEXED BY pending_outbound_message_recipient",
	} {
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("%s: pre-read: %w", e.name, err)
		}
		for rows.Next() {
		}
		err = rows.Err()
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: pre-read: %w", e.name, err)
		}
	}
	return nil
}

// restoreCache gives e's connection its shipped page cache back and
// frees what the pre-read took.
func (e *env) restoreCache(ctx context.Context) error {
	for _, q := range []string{fmt.Sprintf("PRAGMA cache_size = -%d", sqliteaccess.PageCacheKiB), "PRAGMA shrink_memory"} {
		if _, err := e.rawDB().ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", e.name, q, err)
		}
	}
	return e.applyPragmas(ctx)
}
