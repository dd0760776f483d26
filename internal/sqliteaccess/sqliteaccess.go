// Package sqliteaccess is what this module's tools and tests reach in a
// SQLite store beyond its public API: the database handle under a store
// (to inspect or damage the file beside it), the keys it seals with and
// its sequence high-water mark, the data source name the store opens a
// file with, and, carried in the context given to Open, a migration
// directory to migrate with instead of the embedded one and a driver to
// open the file through instead of the build's SQLite driver
// (internal/sqlitedriver); and how a writer that refuses a file closes it
// (CloseKeepingWAL).
//
// DB and Keyring read the store's unexported fields by reflection, and
// SequenceHighWater asks the store's database: store/sqlitestore holds
// nothing for them, neither a registration nor a hook. Being internal,
// none of this is an application's API.
package sqliteaccess

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/seal"
)

// storeType is the type DB, Keyring and SequenceHighWater take a pointer
// to (this package cannot import store/sqlitestore, which imports it).
const storeType = "github.com/securemsg/storage/store/sqlitestore.Store"

// field returns the field name of *st, a *sqlitestore.Store, which must
// be of type T. It panics, naming the field, if st is not a
// *sqlitestore.Store or the field is missing or of another type: a
// rename in the store must be made here too.
func field[T any](st any, name string) T {
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().PkgPath()+"."+v.Type().Elem().Name() != storeType {
		panic(fmt.Sprintf("sqliteaccess: %T is not a non-nil *%s", st, storeType))
	}
	f := v.Elem().FieldByName(name)
	want := reflect.TypeFor[T]()
	if !f.IsValid() {
		panic(fmt.Sprintf("sqliteaccess: %s has no field %q (of type %v): rename it in internal/sqliteaccess too", storeType, name, want))
	}
	if f.Type() != want {
		panic(fmt.Sprintf("sqliteaccess: field %q of %s is a %v, want %v: change internal/sqliteaccess too", name, storeType, f.Type(), want))
	}
	// The field is set once by Open, before the store is returned, and
	// never written again.
	return *(*T)(unsafe.Pointer(f.UnsafeAddr()))
}

// DB returns the database handle of st, a *sqlitestore.Store.
func DB(st any) *sql.DB { return field[*sql.DB](st, "conn") }

// Keyring returns the keys st, a *sqlitestore.Store, seals with: the
// seal.RotatingSealer given to Open.
func Keyring(st any) seal.RotatingSealer { return field[seal.RotatingSealer](st, "keys") }

// SequenceHighWater returns the pending sequence's high-water mark of st,
// a *sqlitestore.Store: the largest sequence ever handed out.
func SequenceHighWater(ctx context.Context, st any) (int64, error) {
	hw, err := db.New(DB(st)).PendingOutboundSequenceHighWater(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: sequence high-water mark: %w", err)
	}
	return hw, nil
}

// PageCacheKiB is the most memory, in KiB, a store's connection uses for
// SQLite's page cache (PRAGMA cache_size = -PageCacheKiB).
//
// The page cache size and memory mapping were chosen by measurement
// (cmd/pendingbench, BENCHMARKS.md): with pages at random cursors over a
// queue of a million, a 64 MiB cache changes nothing (nearly every page
// read is a first touch, which no cache holds), and mmap_size, which
// saves the read copies when warm, makes the first calls after a start
// ten times slower (each page fault reads ahead 128 KiB). So the cache
// stays at SQLite's default of 2 MB, stated here so that a change is
// deliberate, and the file is not memory-mapped (mmap_size 0, the
// build's default).
const PageCacheKiB = 2000

// DSN returns the data source name a store opens path with, for the
// build's SQLite driver (sqlitedriver.StoreDSN): immediate transactions,
// a busy timeout, foreign keys on, synchronous=FULL (WAL is set by Open
// once the file passed its checks, and stays set in the file), and a page
// cache of PageCacheKiB.
func DSN(path string) string {
	return sqlitedriver.StoreDSN(migration.URIPath(path), PageCacheKiB)
}

type migratorKey struct{}

// WithMigrator returns a copy of ctx that makes sqlitestore.Open migrate
// with m instead of the embedded directory: for tools that prove a
// migration directory under review before it is built into an
// application (cmd/migrate fixture-test -dir).
func WithMigrator(ctx context.Context, m *migration.Migrator) context.Context {
	return context.WithValue(ctx, migratorKey{}, m)
}

// Migrator returns the migrator ctx carries (WithMigrator), or nil.
func Migrator(ctx context.Context) *migration.Migrator {
	m, _ := ctx.Value(migratorKey{}).(*migration.Migrator)
	return m
}

// DefaultDriver is the database/sql driver sqlitestore.Open opens its
// file through unless the context names another (WithDriver): the build's
// SQLite driver.
const DefaultDriver = sqlitedriver.Name

type driverKey struct{}

// WithDriver returns a copy of ctx that makes sqlitestore.Open open its
// file through the driver registered as name: for the reliability tests,
// whose driver wraps the build's SQLite driver (sqlitedriver.New) and
// injects storage faults (failing statements and commits, a full disk).
// The driver must be that driver or wrap it, passing its errors through
// unchanged (the store inspects them). Being internal, the choice is no
// part of the store's API: an application always gets the build's
// driver.
func WithDriver(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, driverKey{}, name)
}

// Driver returns the driver ctx names (WithDriver), or DefaultDriver.
func Driver(ctx context.Context) string {
	if name, ok := ctx.Value(driverKey{}).(string); ok {
		return name
	}
	return DefaultDriver
}

// CloseKeepingWAL closes conn, the last connection to the database file
// at path, without letting it checkpoint the -wal beside the file into
// the file and remove it, as the last connection to close does: a writer
// that refuses a file found with a -wal leaves both as they were. A
// read-only connection (through driver) in a read transaction keeps conn
// from the lock that checkpoint takes, and a read-only connection never
// checkpoints when it closes. The -shm SQLite made or used to read the
// -wal stays: another process may have it mapped, and only SQLite knows
// when it is the last. If the read-only connection cannot read, conn is
// closed as usual.
func CloseKeepingWAL(conn *sql.DB, driver, path string) {
	ctx := context.Background()
	ro, err := sql.Open(driver, DSN(path)+"&mode=ro")
	if err != nil {
		conn.Close()
		return
	}
	c, err := ro.Conn(ctx)
	if err == nil {
		// BEGIN, then a read: the read transaction holds a shared lock.
		if _, err = c.ExecContext(ctx, "BEGIN DEFERRED"); err == nil {
			_, _ = db.New(c).TableCount(ctx, "sqlite_master")
		}
	}
	conn.Close()
	if c != nil {
		c.ExecContext(ctx, "ROLLBACK")
		c.Close()
	}
	ro.Close()
}
