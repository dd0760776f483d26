package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/store"
)

// TestStoreEnforcesTheFrameLimit: the store refuses exactly what Send
// refuses, so a message the client cannot frame is never stored by anyone.
func TestStoreEnforcesTheFrameLimit(t *testing.T) {
	require.Equal(t, client.MaxBody, store.MaxPlaintextSize)
}
