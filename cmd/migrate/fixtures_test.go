package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/frozen"
	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/migration"
	"github.com/securemsg/storage/internal/testkit/fixturekit"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store/sqlitestore"
)

// sealedHeadDB returns a head database with known sealed contents: the
// version-14 fixture (sealed with the fixture test key) migrated to head,
// as the next fixture would be made.
func sealedHeadDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "head.db")
	require.NoError(t, fixturekit.Load(context.Background(), path, version14.FixtureSQL()))
	code, _, stderr := runCmd(t, "up", "-db", path)
	require.Equal(t, 0, code, stderr)
	return path
}

func headVersion(t *testing.T) string {
	t.Helper()
	m, err := migration.Default()
	require.NoError(t, err)
	return m.Head()
}

func TestFreezeAndProve(t *testing.T) {
	src := sealedHeadDB(t)
	before := snapshot(t, filepath.Dir(src))
	fixtures := t.TempDir()
	out := filepath.Join(fixtures, "version"+headVersion(t))

	code, stdout, stderr := runCmd(t, "freeze", "-db", src, "-out", out)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "froze "+src+" into "+out+" (fixture.sql, contents.json, README.md)\n", stdout)
	require.Equal(t, before, snapshot(t, filepath.Dir(src)), "freeze changed the database it froze")
	require.ElementsMatch(t, []string{"fixture.sql", "contents.json", "README.md"}, keys(snapshot(t, out)))

	var c frozen.Contents
	b, err := os.ReadFile(filepath.Join(out, "contents.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &c))
	require.Equal(t, headVersion(t), c.SchemaVersion)
	require.NotNil(t, c.LocalIdentity)
	require.Equal(t, "alice", c.LocalIdentity.UserID)
	require.Len(t, c.Pending, 12, "the version-14 fixture's 12 pending messages")
	require.EqualValues(t, 12, c.PendingCount)
	require.Len(t, c.Peers, 3)

	// Refuses to overwrite the fixture it just wrote, and leaves it as it is.
	frozenFiles := snapshot(t, out)
	code, _, stderr = runCmd(t, "freeze", "-db", src, "-out", out)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "fixture directory already exists (fixtures are never overwritten)")
	require.Equal(t, frozenFiles, snapshot(t, out))

	// fixture-test runs every versionNN directory it finds: the version-14
	// proof and the new fixture's.
	copyVersion14(t, filepath.Join(fixtures, "version14"), nil)
	require.NoError(t, os.Mkdir(filepath.Join(fixtures, "not-a-fixture"), 0o755))
	code, stdout, stderr = runCmd(t, "fixture-test", "-fixtures", fixtures, "-json")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	var doc fixtureTestDoc
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
	require.True(t, doc.OK)
	require.Len(t, doc.Fixtures, 2)
	require.Equal(t, "14", doc.Fixtures[0].Version)
	require.Equal(t, headVersion(t), doc.Fixtures[1].Version)
	for _, f := range doc.Fixtures {
		require.True(t, f.OK, f.Dir)
		require.Greater(t, len(f.Checks), 5, f.Dir)
		for _, c := range f.Checks {
			require.True(t, c.OK, "%s: %s: %s", f.Dir, c.Name, c.Error)
		}
	}
	require.Equal(t, frozenFiles, snapshot(t, out), "fixture-test changed a frozen fixture")
}

func TestProveCatchesTampering(t *testing.T) {
	src := sealedHeadDB(t)
	fixtures := t.TempDir()
	pristine := filepath.Join(fixtures, "pristine", "version"+headVersion(t))
	require.NoError(t, os.Mkdir(filepath.Dir(pristine), 0o755))
	code, _, stderr := runCmd(t, "freeze", "-db", src, "-out", pristine)
	require.Equal(t, 0, code, stderr)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(pristine, name))
		require.NoError(t, err)
		return string(b)
	}
	tests := []struct {
		name   string
		file   string
		edit   func(s string) string
		failed string // the failing check
	}{
		{
			name: "a plaintext in contents.json",
			file: "contents.json",
			edit: func(s string) string {
				i := strings.Index(s, `"plaintext": "`) + len(`"plaintext": "`)
				return s[:i] + "00" + s[i+2:]
			},
			failed: "the store opens every sealed value",
		},
		{
			name: "a sealed value in fixture.sql",
			file: "fixture.sql",
			edit: func(s string) string {
				i := strings.Index(s, `INSERT INTO "session"`)
				j := i + strings.Index(s[i:], "X'") + 40
				return s[:j] + flipHex(s[j]) + s[j+1:]
			},
			failed: "the store opens every sealed value",
		},
		{
			name: "the schema in fixture.sql",
			file: "fixture.sql",
			edit: func(s string) string {
				i := strings.Index(s, "CREATE INDEX pending_outbound_message_recipient")
				j := i + strings.Index(s[i:], ";\n")
				return s[:i] + s[j+2:]
			},
			failed: "schema and history equal head's",
		},
		{
			name:   "a revision hash in fixture.sql",
			file:   "fixture.sql",
			edit:   func(s string) string { return strings.Replace(s, "'e8GFqXXt", "'AAAAAAAA", 1) },
			failed: "schema and history equal head's",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), filepath.Base(pristine))
			require.NoError(t, os.Mkdir(dir, 0o755))
			for _, n := range []string{"fixture.sql", "contents.json", "README.md"} {
				s := read(n)
				if n == tt.file {
					edited := tt.edit(s)
					require.NotEqual(t, s, edited)
					s = edited
				}
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644))
			}
			code, stdout, _ := runCmd(t, "fixture-test", "-fixtures", filepath.Dir(dir))
			require.Equal(t, 1, code, stdout)
			require.Contains(t, stdout, "FAIL "+tt.failed, stdout)
		})
	}
}

func flipHex(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestFreezeRefuses(t *testing.T) {
	head := headVersion(t)
	otherKey := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "other.db")
		k, err := seal.GenerateKey()
		require.NoError(t, err)
		kr, err := seal.NewKeyring(k)
		require.NoError(t, err)
		s, err := sqlitestore.Open(context.Background(), path, kr)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return path
	}
	tests := []struct {
		name string
		db   func(t *testing.T) string
		out  string // base name of the output directory
		want string
	}{
		{name: "directory not named after the head", db: sealedHeadDB, out: "version99", want: "must be named version" + head},
		{name: "not at head", db: v14With(), out: "version" + head, want: "database is not at head"},
		{
			name: "drifted",
			db: func(t *testing.T) string {
				p := sealedHeadDB(t)
				conn, err := sql.Open("sqlite3", "file:"+p)
				require.NoError(t, err)
				defer conn.Close()
				_, err = conn.Exec("DROP INDEX pending_outbound_message_recipient")
				require.NoError(t, err)
				return p
			},
			out: "version" + head, want: "database is not at head",
		},
		{name: "sealed with another key", db: otherKey, out: "version" + head, want: "not sealed with the fixture test key"},
		{name: "not a database", db: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "x.txt")
			require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("text\n", 200)), 0o644))
			return p
		}, out: "version" + head, want: "is not a SQLite database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.db(t)
			before := snapshot(t, filepath.Dir(src))
			parent := t.TempDir()
			code, stdout, stderr := runCmd(t, "freeze", "-db", src, "-out", filepath.Join(parent, tt.out))
			require.Equal(t, exitError, code, stdout)
			require.Contains(t, stderr, tt.want)
			require.Empty(t, snapshot(t, parent), "nothing written")
			require.Equal(t, before, snapshot(t, filepath.Dir(src)), "the database changed")
		})
	}
}

// TestFreezeNext: freeze without -db proves the newest fixture at head and
// writes it migrated to head as the next fixture, which fixture-test then
// proves beside the old one; it never overwrites, and a fixture that fails
// its proof is not frozen (exit 1).
func TestFreezeNext(t *testing.T) {
	fixtures := t.TempDir()
	copyVersion14(t, filepath.Join(fixtures, "version14"), nil)
	v14Before := snapshot(t, filepath.Join(fixtures, "version14"))
	code, stdout, stderr := runCmd(t, "freeze", "-fixtures", fixtures)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	out := filepath.Join(fixtures, "version"+headVersion(t))
	require.Contains(t, stdout, expand(t, "== "+filepath.Join(fixtures, "version14")+" (version 14), proved at head {head} before it is frozen\n"))
	require.Contains(t, stdout, "ok   every column kept keeps its value, unless a change is declared\n")
	require.Contains(t, stdout, expand(t, "froze "+filepath.Join(fixtures, "version14")+" migrated to head {head} into "+out))
	require.NotContains(t, stdout, "FAIL")
	for _, name := range []string{frozen.FixtureFile, frozen.ContentsFile, frozen.ReadmeFile} {
		require.FileExists(t, filepath.Join(out, name))
	}
	contents, err := os.ReadFile(filepath.Join(out, frozen.ContentsFile))
	require.NoError(t, err)
	require.Contains(t, string(contents), `"schema_version": "`+headVersion(t)+`"`)
	require.Contains(t, string(contents), `"pending_outbound_count": 12`)
	require.Equal(t, v14Before, snapshot(t, filepath.Join(fixtures, "version14")), "the source fixture is only read")

	code, stdout, stderr = runCmd(t, "fixture-test", "-fixtures", fixtures)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, expand(t, "== "+out+" (version {head})\n"))
	require.NotContains(t, stdout, "FAIL")

	frozenFiles := snapshot(t, out)
	code, _, stderr = runCmd(t, "freeze", "-fixtures", fixtures)
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "fixture directory already exists")
	require.Equal(t, frozenFiles, snapshot(t, out))

	// A next version that changes data without declaring it: the proof
	// fails, nothing is written, exit 1; the JSON document carries the
	// proof.
	dir := writeDir(t, withFiles(t, map[string]string{"{next}_touch.sql": "UPDATE storage_key SET created_at = 1;\n"}))
	code, stdout, stderr = runCmd(t, "freeze", "-fixtures", fixtures, "-dir", dir, "-json")
	require.Equal(t, exitFinding, code, stderr)
	doc := decode[freezeDoc](t, stdout)
	require.False(t, doc.OK)
	require.Equal(t, out, doc.From)
	require.Equal(t, filepath.Join(fixtures, "version"+nextVersion(t)), doc.Out)
	require.Contains(t, doc.Error, "the fixture to migrate does not pass fixture-test at head")
	require.NotEmpty(t, doc.Checks)
	require.NoDirExists(t, filepath.Join(fixtures, "version"+nextVersion(t)))
}

// copyVersion14 copies the version-14 fixture files the proof reads into
// dir, each passed through edit (nil: unchanged).
func copyVersion14(t *testing.T, dir string, edit func(name, s string) string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{frozen.FixtureFile, frozen.ExpectedFile} {
		b, err := fs.ReadFile(version14.Files(), name)
		require.NoError(t, err)
		s := string(b)
		if edit != nil {
			s = edit(name, s)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644))
	}
}

// fixture-test reports the version-14 proof check by check, from the
// proof's results: a broken copy of the fixture fails exactly the check
// for its defect, with the reason, in the JSON document and in the text.
func TestFixtureTestVersion14Checks(t *testing.T) {
	m, err := migration.Default()
	require.NoError(t, err)
	pristine, err := frozen.Prove(context.Background(), m, "../../fixtures/version14", io.Discard)
	require.NoError(t, err)
	tests := []struct {
		name   string
		edit   func(name, s string) string
		failed string // "" when every check passes
		detail string
	}{
		{name: "pristine copy"},
		{
			name: "a plaintext in expected.json",
			edit: func(name, s string) string {
				if name != "expected.json" {
					return s
				}
				return strings.Replace(s, "fixture message 3 ", "fixture message 9 ", 1)
			},
			failed: "every pending row opens with the fixture key to its plaintext; count and cursor order unchanged (pages of 5)",
			detail: `plaintext "fixture message 3 for`,
		},
		{
			name: "a sealed value in fixture.sql",
			edit: func(name, s string) string {
				if name != "fixture.sql" {
					return s
				}
				i := strings.Index(s, "INSERT INTO session ")
				j := i + strings.Index(s[i:], "X'") + 40
				return s[:j] + flipHex(s[j]) + s[j+1:]
			},
			failed: "every other sealed value opens with the fixture key to its plaintext",
			detail: "authentication",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixtures := t.TempDir()
			copyVersion14(t, filepath.Join(fixtures, "version14"), tt.edit)
			want := 0
			if tt.failed != "" {
				want = 1
			}

			code, stdout, stderr := runCmd(t, "fixture-test", "-fixtures", fixtures, "-json")
			require.Equal(t, want, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			var doc fixtureTestDoc
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
			require.Len(t, doc.Fixtures, 1)
			f := doc.Fixtures[0]
			require.Equal(t, "14", f.Version)
			require.Equal(t, tt.failed == "", f.OK)
			require.Equal(t, tt.failed == "", doc.OK)
			require.Len(t, f.Checks, len(pristine), "every check of the proof, none added")
			for i, c := range f.Checks {
				require.Equal(t, pristine[i].Name, c.Name, "the proof's checks, in order")
				if c.Name == tt.failed {
					require.False(t, c.OK)
					require.Contains(t, c.Error, tt.detail)
					continue
				}
				require.True(t, c.OK, "%s: %s", c.Name, c.Error)
				require.Empty(t, c.Error)
			}

			code, stdout, _ = runCmd(t, "fixture-test", "-fixtures", fixtures)
			require.Equal(t, want, code, stdout)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			require.Len(t, lines, 1+len(f.Checks), "a header, then one line per check")
			for i, c := range f.Checks {
				l := "ok   " + c.Name
				if !c.OK {
					l = "FAIL " + c.Name + ": " + c.Error
				}
				require.Equal(t, l, lines[1+i])
			}
		})
	}
}
