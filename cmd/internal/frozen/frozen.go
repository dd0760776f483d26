// Package frozen makes and proves frozen database fixtures: directories
// fixtures/versionNN holding a database of schema version NN as reviewable
// SQL text, with what it holds in clear, so that every later schema
// version is tested against it.
//
// Freeze writes such a directory from a head database whose sealed values
// are sealed with the published fixture test key (fixturekit.Key), and
// FreezeNext from the newest fixture migrated to head: the
// database as fixture.sql, its contents read through the SQLite store as
// contents.json, and a README. It refuses to write into a directory that
// exists. Prove loads a directory into a temporary database, migrates it to
// head and checks that no row was lost and no value changed but as the
// migrations' authors declared (DeclaredSuffix), that the schema and
// history are head's, and that the store still reads the same contents. The
// version-14 fixture, which records its contents in expected.json, is
// proved by the same code; Find lists it with the others. ProveLegacy
// proves the legacy plaintext fixture (fixtures/legacy, FindLegacy) the
// same way, through the store's legacy upgrade.
//
// Dump is the one renderer of a database's rows for the fixtures: Freeze
// writes it as fixture.sql and Prove compares a dump taken before the
// migration with one taken after it, row by row and column by column.
//
// Package frozen never writes anywhere but the directory given to Freeze,
// the path given to Load and its own temporary directories, and never
// changes the database it freezes (it reads a copy). It reads tables with
// statements built from sqlite_master, because it must see every row of
// every table whatever the schema: these are inspection statements of a
// test tool, not store statements, which all live in queries/*.sql.
package frozen

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/sqlitestore"
)

// File names in a fixture directory made by Freeze.
const (
	FixtureFile  = "fixture.sql"
	ContentsFile = "contents.json"
	ReadmeFile   = "README.md"
)

var dirRE = regexp.MustCompile(`^version([0-9]+)$`)

// Dir is one frozen fixture directory.
type Dir struct {
	Path    string
	Version string
}

// Find returns every versionNN directory under root (fixtures/), oldest
// version first. It returns an error only when root cannot be read.
func Find(root string) ([]Dir, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("frozen: %w", err)
	}
	var out []Dir
	for _, e := range entries {
		if m := dirRE.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			out = append(out, Dir{Path: filepath.Join(root, e.Name()), Version: m[1]})
		}
	}
	slices.SortFunc(out, func(a, b Dir) int { return migration.CompareVersions(a.Version, b.Version) })
	return out, nil
}

// Keyring returns a keyring of the published fixture test key.
func Keyring() (*seal.Keyring, error) { return seal.NewKeyring(fixturekit.Key()) }

// Contents is what a fixture's database holds, in clear, as the SQLite
// store reads it with the fixture test key. Byte values are hex.
type Contents struct {
	SchemaVersion string         `json:"schema_version"`
	LocalIdentity *LocalIdentity `json:"local_identity"`
	Peers         []Peer         `json:"peers"`
	Pending       []Pending      `json:"pending_outbound"`
	PendingCount  int64          `json:"pending_outbound_count"`
}

// LocalIdentity is the device's identity.
type LocalIdentity struct {
	UserID   string `json:"user_id"`
	DeviceID int64  `json:"device_id"`
	Secret   string `json:"secret"`
}

// Peer is one remote device's state.
type Peer struct {
	UserID     string `json:"user_id"`
	DeviceID   int64  `json:"device_id"`
	Pin        string `json:"pin,omitempty"`
	Session    string `json:"session,omitempty"`
	Initiation string `json:"initiation,omitempty"`
}

// Pending is one pending outbound message.
type Pending struct {
	Sequence  int64  `json:"sequence"`
	UserID    string `json:"user_id"`
	DeviceID  int64  `json:"device_id"`
	LogicalID string `json:"logical_id"`
	Plaintext string `json:"plaintext"`
}

// Freeze writes the database at src, which must be at m's head with no
// drift and sealed with the fixture test key, into the new directory out,
// named versionNN after the head. It returns ErrExists if out exists,
// ErrBadName, ErrNotHead, ErrNoRows (nothing but the history to freeze) or
// ErrWrongKey; on any error out is removed.
func Freeze(ctx context.Context, m *migration.Migrator, src, out string) (err error) {
	if err := checkOut(m, out); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "frozen-freeze-")
	if err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	defer os.RemoveAll(tmp)
	copyPath := filepath.Join(tmp, "copy.db")
	if err := copyDatabase(ctx, src, copyPath); err != nil {
		return err
	}

	conn := fixturekit.OpenRW(copyPath)
	defer conn.Close()
	drift, err := pipeline.Drift(ctx, m, conn)
	if err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	if !drift.Empty() {
		return fmt.Errorf("%w: %d schema and %d history difference(s) (run migrate drift -db %s)", ErrNotHead, len(drift.Schema), len(drift.History), src)
	}
	var revisions int64
	if err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error {
		revs, err := db.New(tx).ListRevisions(ctx)
		revisions = int64(len(revs))
		return err
	}); err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	if revisions == 0 {
		return fmt.Errorf("%w: no schema_revision rows", ErrNotHead)
	}
	dump, err := Dump(ctx, conn)
	if err != nil {
		return err
	}
	if dump.rowsOutside() == 0 {
		return fmt.Errorf("%w: %s", ErrNoRows, src)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	contents, err := ReadContents(ctx, m, copyPath, m.Head())
	if err != nil {
		return err
	}
	cj, err := json.MarshalIndent(contents, "", "  ")
	if err != nil {
		return fmt.Errorf("frozen: %w", err)
	}

	if err := os.Mkdir(out, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, out)
		}
		return fmt.Errorf("frozen: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(out)
		}
	}()
	for name, data := range map[string][]byte{
		FixtureFile:  dump.SQL(m.Head()),
		ContentsFile: append(cj, '\n'),
		ReadmeFile:   readme(m.Head(), contents),
	} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return fmt.Errorf("frozen: %w", err)
		}
	}
	return nil
}

// checkOut refuses an out directory that exists or is not named after
// m's head.
func checkOut(m *migration.Migrator, out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("%w: %s", ErrExists, out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("frozen: %w", err)
	}
	if name := filepath.Base(out); name != "version"+m.Head() {
		return fmt.Errorf("%w: %s holds version %s, so it must be named version%s", ErrBadName, out, m.Head(), m.Head())
	}
	return nil
}

// FreezeNext makes the next frozen fixture from the fixture directory dir
// (the newest, in practice): it proves dir at m's head (Prove, writing
// each check to w), then loads its fixture.sql into a temporary database,
// migrates it to head and freezes that into out (Freeze). It returns the
// proof's checks, and an error wrapping ErrNotProved if the proof fails,
// or Freeze's errors (ErrExists and ErrBadName before anything runs); dir
// is only read.
func FreezeNext(ctx context.Context, m *migration.Migrator, dir, out string, w io.Writer) ([]Check, error) {
	if err := checkOut(m, out); err != nil {
		return nil, err
	}
	checks, err := Prove(ctx, m, dir, w)
	if err != nil {
		return checks, fmt.Errorf("%w: %w", ErrNotProved, err)
	}
	return checks, freezeMigrated(ctx, m, dir, out)
}

// freezeMigrated loads dir's fixture.sql into a temporary database,
// migrates it to m's head and freezes it into out.
func freezeMigrated(ctx context.Context, m *migration.Migrator, dir, out string) error {
	fixture, err := os.ReadFile(filepath.Join(dir, FixtureFile))
	if err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	tmp, err := os.MkdirTemp("", "frozen-next-")
	if err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "next.db")
	if err := fixturekit.Load(ctx, path, fixture); err != nil {
		return err
	}
	conn := fixturekit.OpenRW(path)
	defer conn.Close()
	if _, err := m.Up(ctx, conn); err != nil {
		return fmt.Errorf("frozen: migrate %s to head: %w", dir, err)
	}
	if err := conn.Close(); err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	return Freeze(ctx, m, path, out)
}

// copyDatabase copies the database at src to dst from a read-only
// connection (pipeline.ReadStable and pipeline.CopyTo): a consistent copy
// (WAL content included) that never writes to src, made again if src
// changed while it was copied.
func copyDatabase(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("frozen: %w", err)
	}
	err := pipeline.ReadStable(ctx, src, func(conn *sql.DB) error {
		// A copy from an attempt that saw src change is discarded.
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return pipeline.CopyTo(ctx, conn, dst)
	})
	if err != nil {
		return fmt.Errorf("frozen: copy %s: %w", src, err)
	}
	return nil
}

// ReadContents opens the database at path with the SQLite store (which
// migrates it with m) and the fixture test key and reads everything it
// holds in clear, recording version as its schema version. The store may
// write to path (it opens read-write). It returns an error wrapping
// ErrWrongKey if the store refuses the key.
func ReadContents(ctx context.Context, m *migration.Migrator, path, version string) (*Contents, error) {
	keys, err := Keyring()
	if err != nil {
		return nil, err
	}
	s, err := sqlitestore.Open(sqliteaccess.WithMigrator(ctx, m), path, keys)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWrongKey, err)
	}
	defer s.Close()
	c := &Contents{SchemaVersion: version, Peers: []Peer{}, Pending: []Pending{}}
	li, err := s.LocalIdentity(ctx)
	switch {
	case err == nil:
		c.LocalIdentity = &LocalIdentity{UserID: li.Address.UserID, DeviceID: li.Address.DeviceID, Secret: hex.EncodeToString(li.Secret)}
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("frozen: local identity: %w", err)
	}
	addrs, err := peerAddresses(ctx, sqliteaccess.DB(s))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		p, err := s.Peer(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("frozen: peer %s: %w", a, err)
		}
		c.Peers = append(c.Peers, Peer{
			UserID: a.UserID, DeviceID: a.DeviceID,
			Pin: hex.EncodeToString(p.Pin), Session: hex.EncodeToString(p.Session), Initiation: hex.EncodeToString(p.Initiation),
		})
	}
	req := store.PageRequest{Limit: store.MaxPageSize}
	for {
		page, err := s.PendingMessages(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("frozen: pending page after %d: %w", req.After, err)
		}
		for _, msg := range page.Messages {
			c.Pending = append(c.Pending, Pending{
				Sequence: msg.Sequence, UserID: msg.Recipient.UserID, DeviceID: msg.Recipient.DeviceID,
				LogicalID: msg.ID.String(), Plaintext: hex.EncodeToString(msg.Plaintext),
			})
		}
		if page.NextAfterSequence == nil {
			break
		}
		req.After = page.NextAfterSequence
	}
	if c.PendingCount, err = s.PendingMessageCount(ctx, nil); err != nil {
		return nil, fmt.Errorf("frozen: count pending: %w", err)
	}
	return c, nil
}

// peerAddresses lists every remote device with a pin, session or
// initiation, through the rotation batch queries (the only ones that list
// these tables), oldest address first.
func peerAddresses(ctx context.Context, conn *sql.DB) ([]store.DeviceAddress, error) {
	q := db.New(conn)
	seen := map[store.DeviceAddress]bool{}
	type batch func(after store.DeviceAddress) ([]store.DeviceAddress, error)
	const n = 100
	batches := []batch{
		func(a store.DeviceAddress) ([]store.DeviceAddress, error) {
			rows, err := q.SealedIdentityPinBatch(ctx, db.SealedIdentityPinBatchParams{AfterUserID: a.UserID, AfterDeviceID: a.DeviceID, RowLimit: n})
			out := make([]store.DeviceAddress, len(rows))
			for i, r := range rows {
				out[i] = store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}
			}
			return out, err
		},
		func(a store.DeviceAddress) ([]store.DeviceAddress, error) {
			rows, err := q.SealedSessionBatch(ctx, db.SealedSessionBatchParams{AfterUserID: a.UserID, AfterDeviceID: a.DeviceID, RowLimit: n})
			out := make([]store.DeviceAddress, len(rows))
			for i, r := range rows {
				out[i] = store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}
			}
			return out, err
		},
		func(a store.DeviceAddress) ([]store.DeviceAddress, error) {
			rows, err := q.SealedSessionInitiationBatch(ctx, db.SealedSessionInitiationBatchParams{AfterUserID: a.UserID, AfterDeviceID: a.DeviceID, RowLimit: n})
			out := make([]store.DeviceAddress, len(rows))
			for i, r := range rows {
				out[i] = store.DeviceAddress{UserID: r.UserID, DeviceID: r.DeviceID}
			}
			return out, err
		},
	}
	for _, next := range batches {
		// The cursor starts below every address ("" sorts first, -1 below
		// every device id).
		after := store.DeviceAddress{DeviceID: -1}
		for {
			got, err := next(after)
			if err != nil {
				return nil, fmt.Errorf("frozen: list peers: %w", err)
			}
			for _, a := range got {
				seen[a] = true
			}
			if len(got) < n {
				break
			}
			after = got[len(got)-1]
		}
	}
	out := make([]store.DeviceAddress, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.SortFunc(out, store.DeviceAddress.Compare)
	return out, nil
}

func readme(version string, c *Contents) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Version-%s database fixture (FROZEN)\n\n", version)
	fmt.Fprintf(&b, "Written by `bin/migrate freeze` (see cmd/migrate/README.md). **Never edit these files**: every\n")
	fmt.Fprintf(&b, "later schema version is tested against them by `bin/migrate fixture-test`.\n\n")
	fmt.Fprintf(&b, "| File | What it is |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| `%s` | the database as SQL: `PRAGMA user_version`, the schema, one INSERT per row (blobs as `X'..'`), `sqlite_sequence` |\n", FixtureFile)
	fmt.Fprintf(&b, "| `%s` | what the SQLite store reads from it with the fixture test key, in clear (hex) |\n\n", ContentsFile)
	fmt.Fprintf(&b, "Sealed with the published fixture **test** key (`fixturekit.Key()`: secret =\n")
	fmt.Fprintf(&b, "bytes `0x00..0x1f`). It holds a local identity: %v; %d peer(s); %d pending\n", c.LocalIdentity != nil, len(c.Peers), c.PendingCount)
	fmt.Fprintf(&b, "outbound message(s).\n")
	return b.Bytes()
}
