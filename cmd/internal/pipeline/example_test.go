package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// A CI step written in Go gates a change of the migration directory on
// what the migrate command checks: lint, then every frozen fixture's
// proof, then where a fleet database stands and whether it drifted. Each
// check's findings are its result, not an error; a pipeline fails the
// step on any of them, as migrate exits 1.
func Example() {
	ctx := context.Background()
	m, err := migration.Default() // or migration.New(os.DirFS(dir), ".")
	if err != nil {
		fmt.Println("error:", err) // migrate would exit 2
		return
	}
	gate := func(check string, findings int) {
		verdict := "pass"
		if findings > 0 {
			verdict = "FAIL" // migrate would exit 1
		}
		fmt.Printf("%s: %d finding(s): %s\n", check, findings, verdict)
	}

	lint, err := pipeline.Lint(ctx, m)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	gate("lint", lint.Blocking())

	fixtures, err := frozen.Find(filepath.Join("..", "..", "..", "fixtures"))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	failed := 0
	for _, d := range fixtures {
		if _, err := frozen.Prove(ctx, m, d.Path, io.Discard); err != nil {
			failed++
		}
	}
	gate("fixture proofs", failed)

	// A database as a device has it: here one just migrated, and one
	// whose index was dropped by hand.
	dir, err := os.MkdirTemp("", "pipeline-example")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer os.RemoveAll(dir)
	for _, tc := range []struct{ name, tamper string }{
		{"migrated.db", ""},
		{"tampered.db", "DROP INDEX pending_outbound_message_recipient"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := migrateTo(ctx, m, path, tc.tamper); err != nil {
			fmt.Println("error:", err)
			return
		}
		var (
			st    migration.Status
			drift pipeline.Differences
		)
		// Read only, on one snapshot, beside a live app if there is one.
		err := pipeline.ReadStable(ctx, path, func(conn *sql.DB) (err error) {
			if st, err = m.Status(ctx, conn); err != nil {
				return err
			}
			drift, err = pipeline.Drift(ctx, m, conn)
			return err
		})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		gate(tc.name+" status", len(st.Pending)+len(st.OutOfOrder))
		gate(tc.name+" drift", len(drift.Found)+len(drift.History))
	}
	// Output:
	// lint: 0 finding(s): pass
	// fixture proofs: 0 finding(s): pass
	// migrated.db status: 0 finding(s): pass
	// migrated.db drift: 0 finding(s): pass
	// tampered.db status: 0 finding(s): pass
	// tampered.db drift: 1 finding(s): FAIL
}

// migrateTo creates the database at path, migrates it to head and runs
// tamper on it.
func migrateTo(ctx context.Context, m *migration.Migrator, path, tamper string) error {
	conn, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_foreign_keys=on")
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := m.Up(ctx, conn); err != nil {
		return err
	}
	if tamper != "" {
		if _, err := conn.ExecContext(ctx, tamper); err != nil {
			return err
		}
	}
	return conn.Close()
}
