package migrationtest

import (
	"github.com/securemsg/storage/internal/sqlitedriver"

	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fails records whether a check failed, without failing the test.
type fails struct {
	testing.TB
	failed bool
}

func (f *fails) Errorf(string, ...any) { f.failed = true }
func (f *fails) FailNow()              { f.failed = true; panic(f) }

func untouched(t *testing.T, path string) (failed bool) {
	f := &fails{TB: t}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		failed = f.failed
	}()
	RequireVictimUntouched(f, path)
	return f.failed
}

// TestRequireUntouched: a fresh victim passes; a dropped row, a dropped
// table or a file created beside it fails.
func TestRequireUntouched(t *testing.T) {
	require.False(t, untouched(t, Victim(t)))
	for name, harm := range map[string]func(t *testing.T, path string){
		"row deleted":   func(t *testing.T, path string) { exec(t, path, "DELETE FROM peers") },
		"table dropped": func(t *testing.T, path string) { exec(t, path, "DROP TABLE peers") },
		"file beside": func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), "copy.db"), nil, 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := Victim(t)
			harm(t, path)
			require.True(t, untouched(t, path))
		})
	}
}

func exec(t *testing.T, path, stmt string) {
	conn, err := sql.Open(sqlitedriver.Name, path)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec(stmt)
	require.NoError(t, err)
}
