package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/storetest"
	"github.com/securemsg/storage/schema"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// BenchmarkOpenSchemaCheck measures what Open's check of the schema
// against the migrations costs. open/first-in-process: Open and Close of
// an existing database with a Migrator new to the process, so the
// migrations are applied once to an in-memory database, as on the first
// Open after an application starts; open/later: the same with Default's
// Migrator, its defined schema cached. check/first-in-process and
// check/later: the check alone (UnknownObjects) on an open store's
// connection.
func BenchmarkOpenSchemaCheck(b *testing.B) {
	ctx := context.Background()
	path := dbPath(b)
	keys := storetest.NewKeyring(b)
	s, err := sqlitestore.Open(ctx, path, keys)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		insert(b, s, store.DeviceAddress{UserID: "bob", DeviceID: 1}, i)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fresh := func(b *testing.B) *migration.Migrator {
		m, err := migration.New(schema.Migrations(), schema.MigrationsDir)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	open := func(b *testing.B, ctx context.Context) {
		s, err := sqlitestore.Open(ctx, path, keys)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("open/first-in-process", func(b *testing.B) {
		for b.Loop() {
			open(b, sqliteaccess.WithMigrator(ctx, fresh(b)))
		}
	})
	b.Run("open/later", func(b *testing.B) {
		for b.Loop() {
			open(b, ctx)
		}
	})
	s, err = sqlitestore.Open(ctx, path, keys)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("check/first-in-process", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			m := fresh(b)
			b.StartTimer()
			if _, err := m.UnknownObjects(ctx, sqliteaccess.DB(s)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check/later", func(b *testing.B) {
		m, err := migration.Default()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := m.UnknownObjects(ctx, sqliteaccess.DB(s)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
