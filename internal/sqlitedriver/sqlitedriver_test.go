package sqlitedriver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/sqlitedriver"
)

func TestName(t *testing.T) {
	ctx := context.Background()
	require.Equal(t, "sqlite3", sqlitedriver.Name(ctx))
	faulty := sqlitedriver.With(ctx, "sqlite3-fault-1")
	require.Equal(t, "sqlite3-fault-1", sqlitedriver.Name(faulty))
	require.Equal(t, "sqlite3", sqlitedriver.Name(ctx), "the parent context is unchanged")
}
