package pipeline

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/sqlclient"
	"github.com/mattn/go-sqlite3"

	"github.com/securemsg/storage/internal/db"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/sqltx"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
)

// queryPackage is one sqlc output package whose queries plans lists.
type queryPackage struct {
	dir     string // generated package, relative to the repository
	queries string // the queries directory it is generated from
	// schema lists extra schema files (relative to the repository) the
	// package's queries need beside head: sqlc-only declarations, whose
	// tables SQLite does not provide itself.
	schema []string
	title  string
}

var queryPackages = []queryPackage{
	{dir: "internal/db", queries: "queries", title: "Store and migration queries (internal/db)"},
	{
		dir: "internal/db/legacydb", queries: "queries/legacy",
		schema: []string{"schema/legacy/pending_outbound_plaintext.sql"},
		title:  "Legacy plaintext migration queries (internal/db/legacydb)",
	},
}

// Planning database: realistic proportions for one client, fixed so that
// the file is the same on every run. It holds no planner statistics, as
// the store's files hold none (sqlitestore.Open clears what a writer
// planted): the plans shown are the plans the store runs.
const (
	planPendingOutbound   = 20_000
	planRecipients        = 200 // remote devices: 100 users, 2 devices each
	planPendingInbound    = 500
	planProcessedInbound  = 20_000
	planSessionsPerDevice = 1
	planInitiations       = 20
)

// planDB creates the planning database in dir: head, seeded with
// deterministic rows through the generated queries (placeholder bytes
// where a sealed record would be: the planner never reads them), without
// statistics. It is opened confined (fixturekit.OpenConfined): the schema
// files it runs are read from disk, so they must not reach another
// database.
func planDB(ctx context.Context, m *migration.Migrator, path string) (*sql.DB, error) {
	conn := fixturekit.OpenConfined("file:" + migration.URIPath(path) + "?mode=rwc&_txlock=immediate&_busy_timeout=5000&_foreign_keys=on")
	conn.SetMaxOpenConns(1)
	if _, err := m.Up(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	err := sqltx.Run(ctx, conn, func(tx *sql.Tx) error { return seedPlanRows(ctx, db.New(tx)) })
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("seed the planning database: %w", err)
	}
	return conn, nil
}

func seedPlanRows(ctx context.Context, q *db.Queries) error {
	placeholder := []byte("not a sealed record: planning rows only")
	device := func(r int) (string, int64) { return fmt.Sprintf("user%03d", r/2), int64(r%2 + 1) }
	id := func(kind byte, i int) []byte {
		b := make([]byte, 16)
		b[0] = kind
		binary.BigEndian.PutUint64(b[8:], uint64(i))
		return b
	}
	if err := q.InsertStorageKey(ctx, db.InsertStorageKeyParams{KeyID: 1, State: "active", Verifier: placeholder, CreatedAt: 1}); err != nil {
		return err
	}
	if err := q.InsertLocalIdentity(ctx, db.InsertLocalIdentityParams{UserID: "me", DeviceID: 1, Sealed: placeholder}); err != nil {
		return err
	}
	for r := 0; r < planRecipients; r++ {
		u, d := device(r)
		if _, err := q.UpsertIdentityPin(ctx, db.UpsertIdentityPinParams{UserID: u, DeviceID: d, Sealed: placeholder}); err != nil {
			return err
		}
		if _, err := q.UpsertSession(ctx, db.UpsertSessionParams{UserID: u, DeviceID: d, Sealed: placeholder}); err != nil {
			return err
		}
		if r < planInitiations {
			if _, err := q.UpsertSessionInitiation(ctx, db.UpsertSessionInitiationParams{UserID: u, DeviceID: d, Sealed: placeholder}); err != nil {
				return err
			}
		}
	}
	for i := 0; i < planPendingOutbound; i++ {
		// Skewed: a quarter of the recipients hold most of the queue.
		r := i % planRecipients
		if i%4 != 0 {
			r = i % (planRecipients / 4)
		}
		u, d := device(r)
		if _, err := q.InsertPendingOutbound(ctx, db.InsertPendingOutboundParams{RecipientUserID: u, RecipientDeviceID: d, LogicalID: id(1, i), Sealed: placeholder}); err != nil {
			return err
		}
	}
	for i := 0; i < planPendingInbound; i++ {
		u, d := device(i % planRecipients)
		if _, err := q.InsertPendingInbound(ctx, db.InsertPendingInboundParams{SenderUserID: u, SenderDeviceID: d, LogicalID: id(2, i), Sealed: placeholder}); err != nil {
			return err
		}
	}
	for i := 0; i < planProcessedInbound; i++ {
		u, d := device(i % planRecipients)
		if _, err := q.InsertProcessedInbound(ctx, db.InsertProcessedInboundParams{SenderUserID: u, SenderDeviceID: d, LogicalID: id(3, i), ProcessedAt: int64(i)}); err != nil {
			return err
		}
	}
	return nil
}

// addSchemaFiles creates, on conn, the tables a package's extra schema
// files declare, except those SQLite provides itself (its pragma_ table
// functions and sqlite_ tables, which sqlc needs declared and a real table
// would shadow). Which table a statement creates is found by replaying the
// files on a private dev database (Replay) and diffing Atlas's
// inspection.
func addSchemaFiles(ctx context.Context, conn *sql.DB, root string, files []string) error {
	var replay []migrate.File
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		replay = append(replay, migrate.NewLocalFile(rel, b))
	}
	return Replay(ctx, replay, func(ctx context.Context, _ *sqlclient.Client, rf *ReplayedFile) error {
		for _, s := range rf.Statements {
			skip := false
			for _, name := range created(s.Changes) {
				if strings.HasPrefix(name, "pragma_") || strings.HasPrefix(name, "sqlite_") {
					skip = true
				}
			}
			if skip {
				continue
			}
			if _, err := conn.ExecContext(ctx, s.Stmt.Text); err != nil {
				return fmt.Errorf("%s: line %d: %w", rf.File.Name(), s.Line, err)
			}
		}
		return nil
	})
}

// PlansDoc renders queries/PLANS.md (which cmd/migrate plans writes) for
// the checkout at root: every query sqlc generated (internal/db and
// internal/db/legacydb, from queries/), with SQLite's EXPLAIN QUERY PLAN
// on a temporary database migrated to m's head and seeded with fixed
// rows, without planner statistics (as the store runs). It returns an error if a query cannot be read or planned,
// or the planning database cannot be built.
func PlansDoc(ctx context.Context, m *migration.Migrator, root string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "migrate-plans-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	libVersion, _, _ := sqlite3.Version()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Query plans (schema version %s, SQLite %s)\n\n", m.Head(), libVersion)
	fmt.Fprintln(&b, "<!-- Generated by `bin/migrate plans` (see cmd/migrate/README.md): do not edit. CI regenerates it and fails on any difference. -->")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Every query sqlc compiles, with SQLite's `EXPLAIN QUERY PLAN` on a database")
	fmt.Fprintln(&b, "migrated to head and seeded with fixed rows in the proportions of one client,")
	fmt.Fprintln(&b, "without planner statistics: the store never runs `ANALYZE` and `Open` clears")
	fmt.Fprintln(&b, "any statistics a file holds, so these are the plans the store runs. A change")
	fmt.Fprintln(&b, "of plan shows in the pull request's diff of this file.")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| table | rows |")
	fmt.Fprintln(&b, "| --- | --- |")
	for _, r := range []struct {
		table string
		n     int
	}{
		{"pending_outbound_message", planPendingOutbound},
		{"processed_inbound_message", planProcessedInbound},
		{"pending_inbound_message", planPendingInbound},
		{"session, identity_pin", planRecipients * planSessionsPerDevice},
		{"session_initiation", planInitiations},
		{"storage_key, local_identity", 1},
	} {
		fmt.Fprintf(&b, "| %s | %d |\n", r.table, r.n)
	}
	fmt.Fprintf(&b, "\nPending outbound messages go to %d recipients, skewed: three quarters of them to a\nquarter of the recipients.\n", planRecipients)

	for i, pkg := range queryPackages {
		queries, err := ReadQueries(filepath.Join(root, filepath.FromSlash(pkg.dir)), pkg.queries)
		if err != nil {
			return nil, err
		}
		conn, err := planDB(ctx, m, filepath.Join(tmp, fmt.Sprintf("plans-%d.db", i)))
		if err != nil {
			return nil, err
		}
		if err := addSchemaFiles(ctx, conn, root, pkg.schema); err != nil {
			conn.Close()
			return nil, err
		}
		fmt.Fprintf(&b, "\n## %s\n", pkg.title)
		if len(pkg.schema) > 0 {
			fmt.Fprintf(&b, "\nOn the same database plus the tables of %s.\n", "`"+strings.Join(pkg.schema, "`, `")+"`")
		}
		for _, q := range queries {
			plan, err := Explain(ctx, conn, q.SQL)
			if err != nil {
				conn.Close()
				return nil, fmt.Errorf("%s (%s): explain: %w", q.Name, q.Source, err)
			}
			text := strings.Join(plan, "\n")
			if len(plan) == 0 {
				text = "(no plan: the statement reads no table)"
			}
			fmt.Fprintf(&b, "\n### %s\n\n`%s` in `%s`\n\n```sql\n%s\n```\n\n```\n%s\n```\n", q.Name, q.Kind, q.Source, q.SQL, text)
		}
		if err := conn.Close(); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}
