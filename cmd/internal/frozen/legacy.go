package frozen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/securemsg/storage/internal/legacy"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/store/sqlitestore"
)

// LegacyDir is the directory, under the fixtures root, of the legacy
// plaintext fixture: a version-14 database whose pending queue is in the
// layout package legacy seals (fixtures/legacy).
const LegacyDir = "legacy"

// LegacyFixture names the legacy plaintext fixture in a declaration file
// (Declared.Fixtures), as "14" names fixtures/version14.
const LegacyFixture = "legacy"

// legacyVersion is the schema version of the legacy fixture's database.
const legacyVersion = "14"

// FindLegacy returns the legacy plaintext fixture's directory under root
// (fixtures/), or "" if root has none (no LegacyDir holding FixtureFile).
// It returns an error only when root/LegacyDir cannot be read.
func FindLegacy(root string) (string, error) {
	dir := filepath.Join(root, LegacyDir)
	_, err := os.Stat(filepath.Join(dir, FixtureFile))
	switch {
	case err == nil:
		return dir, nil
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	}
	return "", fmt.Errorf("frozen: %w", err)
}

// ProveLegacy proves the legacy plaintext fixture in dir at m's head, as
// Prove proves a versionNN fixture: it loads FixtureFile into a temporary
// database, opens it with the store as the release that upgrades such a
// database does (sqlitestore.Open with WithLegacyUpgrade, migrating with
// m), and checks that no row was lost and no value changed but as the
// migrations declare for LegacyFixture (the pending queue's plaintext
// column, which the upgrade seals, and the storage key's verifier, which
// it marks, excepted), that sqlite_sequence is unchanged, that the schema
// and history equal head's, that the store, opened again without the
// upgrade, reads every pending message with its sequence, recipient, id
// and legacy plaintext and opens every other sealed value, and that the
// next pending message gets a sequence above the kept high-water mark.
// It writes each check to w as it completes and returns the checks; the
// error is non-nil if a check failed or the proof could not start.
func ProveLegacy(ctx context.Context, m *migration.Migrator, dir string, w io.Writer) ([]Check, error) {
	path, cleanup, err := tempFixture("frozen-prove-legacy-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	l := &checkList{w: w}
	report, result := l.report, func() ([]Check, error) { return l.result("frozen: " + dir + ": ") }

	fixture, err := os.ReadFile(filepath.Join(dir, FixtureFile))
	if err == nil {
		err = fixturekit.Load(ctx, path, fixture)
	}
	conn := fixturekit.OpenRW(path)
	defer conn.Close()
	if err == nil {
		err = legacyLoaded(ctx, conn)
	}
	if !report(FixtureFile+" loads as a version-"+legacyVersion+" database with its pending queue in the legacy plaintext layout", err) {
		return result()
	}
	before, err := Dump(ctx, conn)
	var queue []Pending
	if err == nil {
		queue, err = legacyQueue(ctx, conn)
	}
	if err == nil && (len(queue) == 0 || before.rowsOutside() == len(queue)) {
		err = fmt.Errorf("%d pending rows and %d rows in all: the fixture needs both a legacy queue and other rows", len(queue), before.rowsOutside())
	}
	if !report("dump every row of every table and sqlite_sequence, and the legacy queue's plaintext", err) {
		return result()
	}
	if !report("close the loaded database", conn.Close()) {
		return result()
	}

	applied := versionsAbove(m, legacyVersion)
	err = openLegacy(ctx, m, path)
	if !report(fmt.Sprintf("the legacy upgrade and the migrations to head %s run (sqlitestore.Open with WithLegacyUpgrade)", m.Head()), err) {
		return result()
	}
	conn = fixturekit.OpenRW(path)
	defer conn.Close()
	after, err := Dump(ctx, conn)
	if report("dump after the upgrade", err) {
		// The upgrade replaces the plaintext by its sealed value and marks
		// the key's verifier: the store's checks below read both.
		b := withoutColumns(before, map[string]string{"pending_outbound_message": "plaintext", "storage_key": "verifier"})
		a := withoutColumns(after, map[string]string{"pending_outbound_message": "sealed", "storage_key": "verifier"})
		var exp *expectation
		declarations, err := readDeclared(m)
		if err == nil {
			exp, err = expectationFor(declarations, applied, LegacyFixture, b)
		}
		if report("the changes to existing data declared for fixture "+LegacyFixture+" beside the applied migrations (*"+DeclaredSuffix+") parse and name rows the fixture holds"+declaredIn(exp), err) {
			at := func(err error) error { return locate(err, fixture, b) }
			report("no row lost, duplicated or added in a table that existed before (declared deletions excepted)", at(checkRowsKept(b, a, exp, LegacyFixture)))
			report("every column kept keeps its value, unless a change is declared (the pending plaintext, now sealed, and the key's verifier, now marked, apart)", at(checkValuesKept(b, a, exp, LegacyFixture)))
		}
		report("sqlite_sequence high-water marks are unchanged", sameSequence(before, after))
	}
	report("schema and history equal head's (Atlas diff, schema_revision)", checkNoDrift(ctx, m, conn))
	if !report("close the upgraded database", conn.Close()) {
		return result()
	}
	report("the store, opened without the upgrade, reads every pending message with its sequence, recipient, id and legacy plaintext, and opens every other sealed value", checkLegacyContents(ctx, m, path, queue))
	report("next insert gets a sequence above the kept high-water mark", checkNextSequence(ctx, m, path, before.Sequence["pending_outbound_message"]))
	return result()
}

// legacyLoaded checks that conn holds a version-14 database with a
// legacy plaintext pending queue.
func legacyLoaded(ctx context.Context, conn *sql.DB) error {
	var uv int64
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&uv); err != nil {
		return err
	}
	if strconv.FormatInt(uv, 10) != legacyVersion {
		return fmt.Errorf("user_version %d", uv)
	}
	found, err := legacy.Found(ctx, conn)
	if err != nil {
		return err
	}
	if !found {
		return errors.New("no pending queue in the legacy plaintext layout")
	}
	return nil
}

// legacyQueue reads the legacy pending queue in sequence order, byte
// values in hex as Contents holds them (an inspection of the legacy
// layout, which no store query reads).
func legacyQueue(ctx context.Context, conn *sql.DB) ([]Pending, error) {
	rows, err := conn.QueryContext(ctx, "SELECT sequence, recipient_user_id, recipient_device_id, lower(hex(logical_id)), lower(hex(plaintext)) FROM pending_outbound_message ORDER BY sequence")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var p Pending
		if err := rows.Scan(&p.Sequence, &p.UserID, &p.DeviceID, &p.LogicalID, &p.Plaintext); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// openLegacy opens the database at path with the store, the legacy
// upgrade and m, and closes it.
func openLegacy(ctx context.Context, m *migration.Migrator, path string) error {
	kr, err := Keyring()
	if err != nil {
		return err
	}
	s, err := sqlitestore.Open(sqliteaccess.WithMigrator(ctx, m), path, kr, sqlitestore.WithLegacyUpgrade())
	if err != nil {
		return err
	}
	return s.Close()
}

// checkLegacyContents reads the upgraded database through the store,
// without the upgrade (which Open refuses on a legacy layout), and
// compares its pending queue with the legacy one.
func checkLegacyContents(ctx context.Context, m *migration.Migrator, path string, queue []Pending) error {
	c, err := ReadContents(ctx, m, path, m.Head())
	if err != nil {
		return err
	}
	if c.LocalIdentity == nil && len(c.Peers) == 0 {
		return errors.New("the store reads no local identity and no peer")
	}
	if int(c.PendingCount) != len(queue) || !slices.Equal(c.Pending, queue) {
		return fmt.Errorf("the store reads %d pending messages (count %d), the legacy queue held %d, or other ones", len(c.Pending), c.PendingCount, len(queue))
	}
	return nil
}

// withoutColumns returns d with the column drop[table] of each table
// named removed from Data (not from Rows or Schema), for the data checks.
func withoutColumns(d *Database, drop map[string]string) *Database {
	out := *d
	out.Data = map[string]*Table{}
	for name, t := range d.Data {
		c, ok := drop[name]
		i := slices.Index(t.Columns, c)
		if !ok || i < 0 {
			out.Data[name] = t
			continue
		}
		nt := &Table{Defaults: t.Defaults}
		nt.Columns = slices.Delete(slices.Clone(t.Columns), i, i+1)
		for _, k := range t.Key {
			switch {
			case k < i:
				nt.Key = append(nt.Key, k)
			case k > i:
				nt.Key = append(nt.Key, k-1)
			}
		}
		for _, row := range t.Values {
			nt.Values = append(nt.Values, slices.Delete(slices.Clone(row), i, i+1))
		}
		out.Data[name] = nt
	}
	return &out
}
