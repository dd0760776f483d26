package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
	"github.com/securemsg/storage/internal/sqltx"
)

// ReadOnly never commits what fn did, and passes fn's error through.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open(sqlitedriver.Name, filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Exec("CREATE TABLE t (x INTEGER)")
	require.NoError(t, err)
	errFn := errors.New("fn failed")
	tests := []struct {
		name string
		fail bool
		want error
	}{
		{name: "fn succeeds", want: nil},
		{name: "fn fails", fail: true, want: errFn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sqltx.ReadOnly(ctx, conn, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
					return err
				}
				var n int
				require.NoError(t, tx.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n))
				require.Equal(t, 1, n, "fn sees its own write")
				if tt.fail {
					return errFn
				}
				return nil
			})
			if tt.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.want)
			}
			var n int
			require.NoError(t, conn.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n))
			require.Zero(t, n, "nothing committed")
		})
	}
}
