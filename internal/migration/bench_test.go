package migration_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store/sqlitestore"
)

// BenchmarkOpenAtHead measures what sqlitestore.Open costs on an existing
// file at head, and the parts of it this package runs.
//
//   - open: Open and Close of the file, with Default's Migrator (its
//     defined schema built already): every Open after a process's first.
//   - open/1M-pending: the same on a file holding a million pending rows
//     (their sealed values are not ones: Open does not open pending
//     rows), in the OS cache.
//   - check/first-in-process: the schema check (CheckObjects) with a
//     Migrator new to the process, so the migrations are replayed into an
//     in-memory database first, as on a process's first Open.
//   - check/later: the same check with the definitions cached.
//   - up/at-head: Up on the file at head (statistics cleared, nothing to
//     apply).
func BenchmarkOpenAtHead(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "client.db")
	keys := storetest.NewKeyring(b)
	s, err := sqlitestore.Open(ctx, path, keys)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			s, err := sqlitestore.Open(ctx, path, keys)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	big := filepath.Join(b.TempDir(), "big.db")
	s, err = sqlitestore.Open(ctx, big, keys)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	seed, err := sql.Open(sqlitedriver.Name, "file:"+big)
	if err != nil {
		b.Fatal(err)
	}
	_, err = seed.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
		INSERT INTO pending_outbound_message (recipient_user_id, recipient_device_id, logical_id, sealed)
		SELECT 'user' || (i % 1000), 1, randomblob(16), randomblob(64) FROM n`)
	if err == nil {
		err = seed.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Run("open/1M-pending", func(b *testing.B) {
		for b.Loop() {
			s, err := sqlitestore.Open(ctx, big, keys)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	conn, err := sql.Open(sqlitedriver.Name, "file:"+path+"?_txlock=immediate&_foreign_keys=on")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	b.Run("check/first-in-process", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			m, err := migration.New(schema.Migrations(), schema.MigrationsDir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := m.CheckObjects(ctx, conn); err != nil {
				b.Fatal(err)
			}
		}
	})
	m, err := migration.Default()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("check/later", func(b *testing.B) {
		for b.Loop() {
			if err := m.CheckObjects(ctx, conn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("up/at-head", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Up(ctx, conn); err != nil {
				b.Fatal(err)
			}
		}
	})
}
