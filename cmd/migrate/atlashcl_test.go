package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/stretchr/testify/require"
)

// TestAtlasProjectFile checks that atlas.hcl at the repository root parses
// and that its env points at the directory this command migrates with.
func TestAtlasProjectFile(t *testing.T) {
	type migrationBlock struct {
		Dir    string   `hcl:"dir"`
		Remain hcl.Body `hcl:",remain"`
	}
	type envBlock struct {
		Name      string         `hcl:"name,label"`
		Migration migrationBlock `hcl:"migration,block"`
		Dev       string         `hcl:"dev"`
		URL       string         `hcl:"url"`
		Remain    hcl.Body       `hcl:",remain"`
	}
	var project struct {
		Envs []envBlock `hcl:"env,block"`
	}
	root := filepath.Join("..", "..")
	f, diags := hclparse.NewParser().ParseHCLFile(filepath.Join(root, "atlas.hcl"))
	require.False(t, diags.HasErrors(), diags.Error())
	diags = gohcl.DecodeBody(f.Body, nil, &project)
	require.False(t, diags.HasErrors(), diags.Error())

	require.Len(t, project.Envs, 1)
	env := project.Envs[0]
	require.Equal(t, "local", env.Name)
	require.Equal(t, "file://schema/migrations", env.Migration.Dir)
	require.Equal(t, "sqlite://dev?mode=memory", env.Dev)
	require.Equal(t, "sqlite://pending.db", env.URL)

	dir := filepath.Join(root, strings.TrimPrefix(env.Migration.Dir, "file://"))
	_, err := os.Stat(filepath.Join(dir, "atlas.sum"))
	require.NoError(t, err)
}
