package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

func TestQuickstart(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	net := transporttest.NewNetwork()
	bob, err := peer(ctx, net, store.DeviceAddress{UserID: "bob", DeviceID: 1})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "alice.db")
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, path, key, net, bob))
	require.Equal(t, "1 pending, to bob/1\nbob/1 says \"hi alice\"\nretried 1 to bob/1\n", out.String())
	require.FileExists(t, path)
}

// TestReadmeShowsThisProgram checks that README.md's quickstart is this
// file, byte for byte, so that what a reader copies compiles and runs.
func TestReadmeShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Quickstart\n")
	require.True(t, ok, "README has no \"Quickstart\" section")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	require.Equal(t, string(src), block)
}

// TestQuickstartPrints runs the program as main does, in its own
// temporary directory, which it removes.
func TestQuickstartPrints(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var out bytes.Buffer
	require.NoError(t, quickstart(context.Background(), &out))
	require.Equal(t, "1 pending, to bob/1\nbob/1 says \"hi alice\"\nretried 1 to bob/1\n", out.String())
	left, err := os.ReadDir(os.Getenv("TMPDIR"))
	require.NoError(t, err)
	require.Empty(t, left, "the temporary directory is removed")
}

// TestQuickstartReturnsFailures: a failing step of the README's program is
// returned as an error (here: the directory for the database is missing).
func TestQuickstartReturnsFailures(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	net := transporttest.NewNetwork()
	bob, err := peer(ctx, net, store.DeviceAddress{UserID: "bob", DeviceID: 1})
	require.NoError(t, err)
	var out bytes.Buffer
	err = run(ctx, &out, filepath.Join(t.TempDir(), "missing", "alice.db"), key, net, bob)
	require.Error(t, err)
	require.Empty(t, out.String())
}
