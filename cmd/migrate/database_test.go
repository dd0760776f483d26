package main

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkDatabase reads through the command's context: once it is done,
// the read fails rather than run.
func TestCheckDatabaseContext(t *testing.T) {
	path := headDB(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
	}{
		{name: "live", ctx: context.Background()},
		{name: "done", ctx: done, err: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
			require.NoError(t, err)
			defer conn.Close()
			err = checkDatabase(tt.ctx, conn, path)
			if tt.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.err)
		})
	}
}
