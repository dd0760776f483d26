package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

func TestDrift(t *testing.T) {
	// The rebuild that drops a hand-added column copies every column
	// session has at head, and only those.
	session := migrationtest.HeadTable(t, "session")
	var quoted []string
	for _, c := range session.Columns {
		quoted = append(quoted, "`"+c+"`")
	}
	copySession := "INSERT INTO `new_session` (" + strings.Join(quoted, ", ") + ") SELECT " + strings.Join(quoted, ", ") + " FROM `session`;"
	indexes := 0
	for _, o := range session.Objects {
		if strings.HasPrefix(strings.ToUpper(o), "CREATE INDEX") || strings.HasPrefix(strings.ToUpper(o), "CREATE UNIQUE INDEX") {
			indexes++
		}
	}
	// session as head defines it but for device_id's CHECK.
	var otherCheck []string
	for _, d := range session.Defs {
		if d == session.Def("device_id") {
			require.Contains(t, d, "CHECK (device_id >= 0)")
			d = strings.Replace(d, "CHECK (device_id >= 0)", "CHECK (device_id >= 1)", 1)
		}
		otherCheck = append(otherCheck, d)
	}
	tests := []struct {
		name string
		db   func(t *testing.T) string
		code int
		want []string // lines in stdout
		not  []string // text that must not be in stdout
	}{
		{
			name: "freshly migrated",
			db:   headWith(),
			want: []string{"no drift: "},
			not:  []string{"-- schema drift", "-- history drift"},
		},
		{
			name: "hand-added column",
			db:   headWith("ALTER TABLE session ADD COLUMN note TEXT"),
			code: 1,
			want: []string{
				// foreign keys off, create, copy, drop, rename, its
				// indexes created again, foreign keys on
				fmt.Sprintf("-- schema drift: %d statement(s) would bring", 6+indexes),
				"-- table session: column note is in the database, not at head: TEXT",
				"CREATE TABLE `new_session` (",
				copySession,
				"DROP TABLE `session`;",
				"ALTER TABLE `new_session` RENAME TO `session`;",
			},
			not: []string{"-- history drift", "pending_outbound_message_recipient", "`note`"},
		},
		{
			name: "changed CHECK and added column",
			db: headWith(
				"DROP TABLE session",
				migrationtest.Create("session", otherCheck),
				"ALTER TABLE pending_outbound_message ADD COLUMN extra BLOB",
			),
			code: 1,
			want: []string{
				"-- table pending_outbound_message: column extra is in the database, not at head: BLOB",
				"-- table session: check is in the database, not at head: CHECK (device_id >= 1)",
				"-- table session: check is at head, missing from the database: CHECK (device_id >= 0)",
			},
			not: []string{"-- history drift"},
		},
		{
			name: "dropped index",
			db:   headWith("DROP INDEX pending_outbound_message_recipient"),
			code: 1,
			want: []string{
				"-- schema drift: 1 statement(s) would bring",
				"-- table pending_outbound_message: index pending_outbound_message_recipient is at head, missing from the database: (recipient_user_id, recipient_device_id, sequence)",
				"CREATE INDEX `pending_outbound_message_recipient` ON `pending_outbound_message` (`recipient_user_id`, `recipient_device_id`, `sequence`);",
			},
			not: []string{"-- history drift", "session"},
		},
		{
			name: "hand-added trigger",
			db:   headWith("CREATE TRIGGER copy_session AFTER INSERT ON session BEGIN SELECT 1; END"),
			code: 1,
			want: []string{
				"-- 1 schema object(s) no migration defines (the store refuses to open ",
				"-- trigger copy_session on session",
				"-- schema drift: 1 statement(s) would bring",
				"-- table session: trigger copy_session is in the database, not at head",
				`-- drop trigger "copy_session" on "session": not in head as it is`,
				"DROP TRIGGER `copy_session`;",
			},
			not: []string{"-- history drift"},
		},
		{
			name: "hand-added view",
			db:   headWith("CREATE VIEW sessions AS SELECT user_id FROM session"),
			code: 1,
			want: []string{"-- view sessions", "DROP VIEW `sessions`;"},
			not:  []string{"-- history drift", "TRIGGER"},
		},
		{
			name: "changed revision hash",
			db:   headWith("UPDATE schema_revision SET hash = 'h1:edited' WHERE version = '15'"),
			code: 1,
			want: []string{
				"-- history drift: 1 schema_revision row(s) disagree with the migration directory",
				"-- version 15: recorded hash h1:edited, but 15_pending_outbound_recipient_index.sql hashes to ",
			},
			not: []string{"-- schema drift"},
		},
		{
			name: "blanked revision hash",
			db:   headWith("UPDATE schema_revision SET hash = '' WHERE version = '15'"),
			code: 1,
			want: []string{"-- version 15: recorded hash , but 15_pending_outbound_recipient_index.sql hashes to "},
			not:  []string{"-- schema drift", "version 14"},
		},
		{
			// Only the adopted legacy baseline may go without a hash.
			name: "revision retyped as a baseline, hash blanked",
			db:   headWith("UPDATE schema_revision SET type = 1, hash = '' WHERE version = '15'"),
			code: 1,
			want: []string{"-- version 15: recorded hash , but 15_pending_outbound_recipient_index.sql hashes to "},
			not:  []string{"-- schema drift", "version 14"},
		},
		{
			name: "deleted revision row",
			db:   headWith("DELETE FROM schema_revision WHERE version = '14'"),
			code: 1,
			want: []string{
				"-- history drift: 1 schema_revision row(s) disagree with the migration directory",
				"-- version 14: 14_baseline.sql is at or below the database's version but not in its history: added out of order (up refuses it), or its row was deleted",
			},
			not: []string{"-- schema drift", "version 15"},
		},
		{
			// The schema is head's, the history is not: up would re-run
			// the head's version on a schema that has it.
			name: "deleted newest revision row",
			db: func(t *testing.T) string {
				return headDB(t, "DELETE FROM schema_revision WHERE version = '{head}'")
			},
			code: 1,
			want: []string{
				"-- history drift: 1 schema_revision row(s) disagree with the migration directory",
				"-- version {head}: no schema_revision row for {headfile}: up would run it",
			},
			not: []string{"-- schema drift", "version 14", "no drift"},
		},
		{
			name: "adopted legacy v14",
			db: func(t *testing.T) string {
				path := v14DB(t)
				code, _, stderr := runCmd(t, "up", "-db", path)
				require.Equal(t, 0, code, stderr)
				return path
			},
			want: []string{"no drift: "},
			not:  []string{"-- schema drift", "-- history drift"},
		},
		{
			name: "version the binary does not know",
			db:   headWithFuture(),
			code: 1,
			want: []string{"-- version {next}: recorded, but the migration directory has no such version"},
			not:  []string{"-- schema drift", "version {head}"},
		},
		{
			name: "partly applied version",
			db:   headWith("UPDATE schema_revision SET applied = 0 WHERE version = '15'"),
			code: 1,
			want: []string{"-- version 15: applied 0/1 statements (15_pending_outbound_recipient_index.sql)"},
		},
		{
			name: "revision row recording an error",
			db:   headWith("UPDATE schema_revision SET error = 'near \"x\": syntax error' WHERE version = '15'"),
			code: 1,
			want: []string{`-- version 15: schema_revision records that 15_pending_outbound_recipient_index.sql failed: near "x": syntax error`},
			not:  []string{"applied 1/1"},
		},
		{
			name: "legacy v14 without history",
			db:   v14With(),
			code: 1,
			want: []string{"CREATE INDEX `pending_outbound_message_recipient`", "CREATE TABLE `schema_revision`"},
			not:  []string{"-- history drift"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.db(t)
			before := snapshot(t, filepath.Dir(path))
			code, stdout, stderr := runCmd(t, "drift", "-db", path)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			lines := strings.Split(stdout, "\n")
			for _, w := range expandAll(t, tt.want) {
				require.True(t, hasLinePrefix(lines, w), "no line starting %q in:\n%s", w, stdout)
			}
			for _, n := range expandAll(t, tt.not) {
				require.NotContains(t, stdout, n)
			}
			if tt.code == 0 {
				require.Empty(t, stderr)
			} else {
				require.True(t, strings.HasPrefix(stderr, "migrate: drift: drift from head: "), stderr)
			}
			require.Equal(t, before, snapshot(t, filepath.Dir(path)), "drift changed the database")
		})
	}
}

func hasLinePrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func TestDriftJSON(t *testing.T) {
	path := headDB(t,
		"ALTER TABLE session ADD COLUMN note TEXT",
		"DROP INDEX pending_outbound_message_recipient",
		"UPDATE schema_revision SET hash = 'h1:edited' WHERE version = '15'")
	code, stdout, stderr := runCmd(t, "drift", "-db", path, "-json")
	require.Equal(t, 1, code, stderr)
	var doc driftDoc
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
	require.Equal(t, "drift", doc.Command)
	require.Equal(t, path, doc.DB)
	require.Equal(t, headVersion(t), doc.Head)
	require.False(t, doc.OK)
	var sqls []string
	for _, c := range doc.Schema {
		require.NotEmpty(t, c.Comment)
		sqls = append(sqls, c.SQL)
	}
	require.Contains(t, sqls, "DROP TABLE `session`")
	require.Contains(t, sqls, "CREATE INDEX `pending_outbound_message_recipient` ON `pending_outbound_message` (`recipient_user_id`, `recipient_device_id`, `sequence`)")
	require.Len(t, doc.History, 1)
	require.Equal(t, pipeline.HistoryHash, doc.History[0].Kind)
	require.Equal(t, "15", doc.History[0].Version)
	require.Equal(t, "h1:edited", doc.History[0].Recorded)

	// Identical: ok, and empty lists rather than null.
	code, stdout, stderr = runCmd(t, "drift", "-db", headDB(t), "-json")
	require.Equal(t, 0, code, stderr)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &raw))
	require.Equal(t, true, raw["ok"])
	require.Equal(t, []any{}, raw["schema"])
	require.Equal(t, []any{}, raw["history"])
}

func TestDriftRefusesWhatIsNotADatabase(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o644))
	before := snapshot(t, dir)
	for _, cmd := range []string{"drift", "status", "plan", "up"} {
		t.Run(cmd, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, cmd, "-db", text)
			require.Equal(t, exitError, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, "migrate: "+cmd+": "+text+" is not a SQLite database (nothing changed)")
			require.Equal(t, 1, strings.Count(stderr, "\n"))
			require.Equal(t, before, snapshot(t, dir), "%s changed the file or left one beside it", cmd)
		})
	}
	code, _, stderr := runCmd(t, "drift")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-db is required")
}

// TestDriftJSONDifferences: -json carries each difference as structured
// fields beside the SQL.
func TestDriftJSONDifferences(t *testing.T) {
	path := headWith("ALTER TABLE session ADD COLUMN note TEXT", "DROP INDEX pending_outbound_message_recipient")(t)
	code, stdout, _ := runCmd(t, "drift", "-db", path, "-json")
	require.Equal(t, 1, code)
	doc := decode[driftDoc](t, stdout)
	require.False(t, doc.OK)
	require.ElementsMatch(t, []pipeline.Difference{
		{Kind: "column", Table: "session", Name: "note", Where: pipeline.InDatabase, Database: "TEXT"},
		{Kind: "index", Table: "pending_outbound_message", Name: "pending_outbound_message_recipient", Where: pipeline.AtHead, Head: "(recipient_user_id, recipient_device_id, sequence)"},
	}, doc.Differences)
	require.NotEmpty(t, doc.Schema)
}

// TestDriftQuotesPlantedNames runs the SQL drift prints for planted
// objects whose names hold a backtick, a double quote and a statement of
// their own on a copy of the database: it drops those objects and nothing
// else, in text and in JSON. The planted "x" is what the first name's
// statement would drop if its backtick ended the identifier.
func TestDriftQuotesPlantedNames(t *testing.T) {
	names := []string{"x`; DELETE FROM storage_key; --", "x`\"; DELETE FROM storage_key; --", "x"}
	quote := func(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
	tests := []struct {
		kind  string
		plant func(quoted string) string
	}{
		{kind: "table", plant: func(q string) string { return "CREATE TABLE " + q + " (a INTEGER)" }},
		{kind: "index", plant: func(q string) string { return "CREATE INDEX " + q + " ON session (user_id)" }},
		{kind: "view", plant: func(q string) string { return "CREATE VIEW " + q + " AS SELECT 1" }},
	}
	for _, tt := range tests {
		for _, format := range []string{"text", "json"} {
			t.Run(tt.kind+" "+format, func(t *testing.T) {
				stmts := []string{"INSERT INTO storage_key (key_id, state, verifier, created_at) VALUES (1, 'active', x'00', 0)"}
				planted := map[string]bool{}
				for _, n := range names {
					stmts = append(stmts, tt.plant(quote(n)))
					planted[tt.kind+" "+n] = true
				}
				path := headDB(t, stmts...)
				args := []string{"drift", "-db", path}
				if format == "json" {
					args = append(args, "-json")
				}
				code, stdout, stderr := runCmd(t, args...)
				require.Equal(t, exitFinding, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				var printed []string
				if format == "json" {
					for _, c := range decode[driftDoc](t, stdout).Schema {
						printed = append(printed, c.SQL)
					}
				} else {
					for _, l := range strings.Split(stdout, "\n") {
						if l != "" && !strings.HasPrefix(l, "-- ") {
							printed = append(printed, l)
						}
					}
				}
				require.NotEmpty(t, printed)

				before := schemaObjects(t, path)
				cp := migrationtest.CopyFiles(t, path)
				conn, err := sql.Open("sqlite3", "file:"+cp)
				require.NoError(t, err)
				defer conn.Close()
				for _, s := range printed {
					_, err := conn.Exec(s)
					require.NoError(t, err, s)
				}
				require.NoError(t, conn.Close())

				want := slices.DeleteFunc(slices.Clone(before), func(o string) bool { return planted[o] })
				require.Len(t, want, len(before)-len(names), "every planted %s is in the database", tt.kind)
				require.Equal(t, want, schemaObjects(t, cp), "the statements drop the planted %ss and nothing else", tt.kind)
				require.Equal(t, 1, query[int](t, cp, "SELECT count(*) FROM storage_key"), "storage_key keeps its row")
			})
		}
	}
}

// schemaObjects lists the schema objects of the database at path as
// "type name", sorted.
func schemaObjects(t *testing.T, path string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.Query("SELECT type || ' ' || name FROM sqlite_master ORDER BY 1")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}
