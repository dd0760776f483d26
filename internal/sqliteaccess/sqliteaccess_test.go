package sqliteaccess_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/internal/sqlitedriver"
)

func TestDriver(t *testing.T) {
	ctx := context.Background()
	require.Equal(t, sqlitedriver.Name, sqliteaccess.Driver(ctx))
	faulty := sqliteaccess.WithDriver(ctx, "sqlite3-fault-1")
	require.Equal(t, "sqlite3-fault-1", sqliteaccess.Driver(faulty))
	require.Equal(t, sqlitedriver.Name, sqliteaccess.Driver(ctx), "the parent context is unchanged")
}
