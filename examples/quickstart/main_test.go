package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/ids"
	"github.com/securemsg/storage/seal"
	"github.com/securemsg/storage/transport/transporttest"
)

func TestQuickstart(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	net := transporttest.NewNetwork()
	bob := ids.DeviceAddress{UserID: "bob", DeviceID: 1}
	require.NoError(t, peer(ctx, net, bob))
	path := filepath.Join(t.TempDir(), "alice.db")
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, path, key, net, bob))
	require.Equal(t, "1 pending, to bob/1\nretried 1 to bob/1\n", out.String())
	require.FileExists(t, path)
}

// TestReadmeShowsThisProgram checks that README.md's "Use it from Go"
// block is the marked part of run, line for line, so it always compiles.
func TestReadmeShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(src), "\t// README:begin\n")
	require.True(t, ok)
	body, _, ok := strings.Cut(rest, "\t// README:end\n")
	require.True(t, ok)
	var want []string
	for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		want = append(want, strings.TrimPrefix(l, "\t"))
	}

	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Use it from Go\n")
	require.True(t, ok, "README has no \"Use it from Go\" section")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	require.Equal(t, strings.Join(want, "\n")+"\n", block)
}

// TestQuickstartReturnsFailures: a failing step of the README's program is
// returned as an error (here: the directory for the database is missing).
func TestQuickstartReturnsFailures(t *testing.T) {
	ctx := context.Background()
	key, err := seal.GenerateKey()
	require.NoError(t, err)
	net := transporttest.NewNetwork()
	bob := ids.DeviceAddress{UserID: "bob", DeviceID: 1}
	require.NoError(t, peer(ctx, net, bob))
	var out bytes.Buffer
	err = run(ctx, &out, filepath.Join(t.TempDir(), "missing", "alice.db"), key, net, bob)
	require.Error(t, err)
	require.Empty(t, out.String())
}
