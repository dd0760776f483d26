package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlclient"
	"ariga.io/atlas/sql/sqlite"
	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// replayFiles returns the files of a directory built with sumFS.
func replayFiles(t *testing.T, files map[string]string) []migrate.File {
	t.Helper()
	m, err := migration.New(sumFS(t, files), ".")
	require.NoError(t, err)
	fs, err := m.Dir().Files()
	require.NoError(t, err)
	return fs
}

// replayed is what one ReplayFunc call saw.
type replayed struct {
	file   string
	lines  []int
	stmts  []string
	tables []string // in the dev database when the call was made
	from   []string // tables of From
	to     []string // tables of To
	added  [][]string
}

func tableNames(r *schema.Realm) []string {
	var out []string
	for _, s := range r.Schemas {
		for _, t := range s.Tables {
			out = append(out, t.Name)
		}
	}
	return out
}

func record(t *testing.T, got *[]replayed) pipeline.ReplayFunc {
	return func(ctx context.Context, dev *sqlclient.Client, rf *pipeline.ReplayedFile) error {
		r := replayed{file: rf.File.Name(), from: tableNames(rf.From), to: tableNames(rf.To)}
		realm, err := dev.InspectRealm(ctx, nil)
		require.NoError(t, err)
		r.tables = tableNames(realm)
		for _, s := range rf.Statements {
			r.lines = append(r.lines, s.Line)
			r.stmts = append(r.stmts, s.Stmt.Text)
			var added []string
			for _, c := range s.Changes {
				switch c := c.(type) {
				case *schema.AddTable:
					added = append(added, "table "+c.T.Name)
				case *schema.ModifyTable:
					for _, tc := range c.Changes {
						switch tc := tc.(type) {
						case *schema.AddColumn:
							added = append(added, "column "+c.T.Name+"."+tc.C.Name)
						case *schema.AddIndex:
							added = append(added, "index "+tc.I.Name)
						}
					}
				}
			}
			r.added = append(r.added, added)
		}
		if n := len(rf.Statements); n > 0 {
			require.Same(t, rf.To, rf.Statements[n-1].After, "To is the schema after the last statement")
		}
		*got = append(*got, r)
		return nil
	}
}

func TestReplay(t *testing.T) {
	ctx := context.Background()
	files := replayFiles(t, map[string]string{
		"1_a.sql": "-- header\n\nCREATE TABLE a (x INTEGER);\n\nCREATE INDEX a_x ON a (x);\n",
		"2_b.sql": "CREATE TABLE b (y INTEGER);\nALTER TABLE a ADD COLUMN z TEXT;\n",
	})
	var got []replayed
	require.NoError(t, pipeline.Replay(ctx, files, record(t, &got)))
	require.Equal(t, []replayed{
		{
			file:  "1_a.sql",
			lines: []int{3, 5},
			stmts: []string{"CREATE TABLE a (x INTEGER);", "CREATE INDEX a_x ON a (x);"},
			// The dev database is as the file left it, From as it found it.
			tables: []string{"a"}, from: nil, to: []string{"a"},
			added: [][]string{{"table a"}, {"index a_x"}},
		},
		{
			file:   "2_b.sql",
			lines:  []int{1, 2},
			stmts:  []string{"CREATE TABLE b (y INTEGER);", "ALTER TABLE a ADD COLUMN z TEXT;"},
			tables: []string{"a", "b"}, from: []string{"a"}, to: []string{"a", "b"},
			added: [][]string{{"table b"}, {"column a.z"}},
		},
	}, got)

	// Every Replay starts from its own empty database: table a, made by
	// the replay above, is not there.
	err := pipeline.Replay(ctx, files[1:2], func(context.Context, *sqlclient.Client, *pipeline.ReplayedFile) error { return nil })
	require.ErrorContains(t, err, "2_b.sql: line 2: replay on the dev database: no such table: a")
}

// Replaying the embedded directory ends at head's schema.
func TestReplayEmbeddedEndsAtHead(t *testing.T) {
	ctx := context.Background()
	m := mustDefault(t)
	files, err := m.Dir().Files()
	require.NoError(t, err)
	var last *schema.Realm
	n := 0
	require.NoError(t, pipeline.Replay(ctx, files, func(_ context.Context, _ *sqlclient.Client, rf *pipeline.ReplayedFile) error {
		n++
		require.NotEmpty(t, rf.Statements, rf.File.Name())
		if last != nil {
			require.Same(t, last, rf.From, "a file starts where the previous one ended")
		}
		last = rf.To
		return nil
	}))
	require.Equal(t, len(files), n)

	head, err := pipeline.OpenHead(ctx, m)
	require.NoError(t, err)
	defer head.Close()
	drv, err := sqlite.Open(head)
	require.NoError(t, err)
	want, err := drv.InspectRealm(ctx, nil)
	require.NoError(t, err)
	// Head also has schema_revision, which Up creates and no file does.
	diff, err := drv.RealmDiff(last, want)
	require.NoError(t, err)
	require.Len(t, diff, 1, "%v", diff)
	add, ok := diff[0].(*schema.AddTable)
	require.True(t, ok, "%T", diff[0])
	require.Equal(t, "schema_revision", add.T.Name)
}

func TestReplayStops(t *testing.T) {
	ctx := context.Background()
	errStop := errors.New("stop")
	tests := []struct {
		name   string
		files  map[string]string
		stopAt string // the file fn fails on, "" never
		want   string // in the error
		called []string
	}{
		{
			name: "a statement that does not run",
			files: map[string]string{
				"1_a.sql": "CREATE TABLE a (x INTEGER);\n",
				"2_b.sql": "CREATE TABLE b (y INTEGER);\n\nTHIS IS NOT SQL;\n",
				"3_c.sql": "CREATE TABLE c (z INTEGER);\n",
			},
			want:   "2_b.sql: line 3: replay on the dev database:",
			called: []string{"1_a.sql"},
		},
		{
			name: "fn's error",
			files: map[string]string{
				"1_a.sql": "CREATE TABLE a (x INTEGER);\n",
				"2_b.sql": "CREATE TABLE b (y INTEGER);\n",
				"3_c.sql": "CREATE TABLE c (z INTEGER);\n",
			},
			stopAt: "2_b.sql",
			want:   "stop",
			called: []string{"1_a.sql", "2_b.sql"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var called []string
			err := pipeline.Replay(ctx, replayFiles(t, tt.files), func(_ context.Context, _ *sqlclient.Client, rf *pipeline.ReplayedFile) error {
				called = append(called, rf.File.Name())
				if rf.File.Name() == tt.stopAt {
					return errStop
				}
				return nil
			})
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, tt.stopAt != "", errors.Is(err, errStop))
			require.Equal(t, tt.called, called)
		})
	}
}

// TestReplayIsConfined replays migration files that reach for other
// database files: ATTACH (alone, or with a custom delimiter in one
// statement that drops a table of a real database) and VACUUM INTO. Every
// one is refused, nothing appears in the directory and the other
// database keeps its table and row.
func TestReplayIsConfined(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		file func(dir, victim string) string
	}{
		{name: "ATTACH creates a file", file: func(dir, _ string) string {
			return "ATTACH DATABASE '" + filepath.Join(dir, "new.db") + "' AS x;\nCREATE TABLE x.t (y INTEGER);\n"
		}},
		{name: "ATTACH and DROP in one statement", file: func(_, victim string) string {
			return "-- atlas:delimiter //\n\nATTACH DATABASE '" + victim + "' AS v; DROP TABLE v.peers; DETACH DATABASE v;\n//\n"
		}},
		{name: "VACUUM INTO writes a copy", file: func(dir, _ string) string {
			return "CREATE TABLE a (x INTEGER);\nVACUUM INTO '" + filepath.Join(dir, "copy.db") + "';\n"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			victim := migrationtest.Victim(t)
			dir := filepath.Dir(victim)

			files := replayFiles(t, map[string]string{"1_a.sql": tt.file(dir, victim)})
			err := pipeline.Replay(ctx, files, func(context.Context, *sqlclient.Client, *pipeline.ReplayedFile) error { return nil })
			require.Error(t, err)
			require.Regexp(t, "not authorized|authorization denied", err.Error())
			migrationtest.RequireVictimUntouched(t, victim)
		})
	}
}

// TestReplayNoPhantomIndexChanges replays the embedded directory through
// version 15 (facts of those landed versions): the baseline only creates
// tables (their UNIQUE constraints' indexes with them), so no statement
// drops an index, and 15 adds exactly its one index; the UNIQUE indexes
// are named as Atlas's differ names them.
func TestReplayNoPhantomIndexChanges(t *testing.T) {
	files, err := migrationtest.Through(t, "15").Dir().Files()
	require.NoError(t, err)
	var added []string
	var last *schema.Realm
	err = pipeline.Replay(context.Background(), files, func(_ context.Context, _ *sqlclient.Client, rf *pipeline.ReplayedFile) error {
		for _, s := range rf.Statements {
			for _, c := range s.Changes {
				mt, ok := c.(*schema.ModifyTable)
				if !ok {
					continue
				}
				for _, tc := range mt.Changes {
					switch tc := tc.(type) {
					case *schema.DropIndex:
						t.Errorf("%s line %d: drops index %s of %s", rf.File.Name(), s.Line, tc.I.Name, mt.T.Name)
					case *schema.AddIndex:
						added = append(added, rf.File.Version()+" "+tc.I.Name)
					}
				}
			}
		}
		last = rf.To
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"15 pending_outbound_message_recipient"}, added)
	pending, ok := last.Schemas[0].Table("pending_outbound_message")
	require.True(t, ok)
	var names []string
	for _, idx := range pending.Indexes {
		names = append(names, idx.Name)
	}
	require.ElementsMatch(t, []string{"pending_outbound_message_recipient_user_id_recipient_device_id_logical_id", "pending_outbound_message_recipient"}, names)
}
