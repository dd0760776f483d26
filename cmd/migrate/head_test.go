package main

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// These take the head from the embedded migration directory, so that a
// new migration breaks no test: the head and the version after it are
// never literals.

// headWithFuture returns a setup that makes a head database recording
// the version after head, which this code does not know, as applied.
func headWithFuture() func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		return headDB(t, migrationtest.FutureRevision(t))
	}
}

// versionList returns the embedded directory's versions as the commands
// list them ("14 15").
func versionList(t *testing.T) string {
	t.Helper()
	return strings.Join(migrationtest.Default(t).Versions(), " ")
}

// expand replaces {head}, {headfile}, {beforehead}, {next}, {versions}
// and {above14} in s with the embedded head, its file's name, the version
// before it, the version after it, versionList and the versions above 14
// ("15 16").
func expand(t *testing.T, s string) string {
	t.Helper()
	m := migrationtest.Default(t)
	files, err := m.Dir().Files()
	require.NoError(t, err)
	return strings.NewReplacer(
		"{headfile}", files[len(files)-1].Name(),
		"{head}", m.Head(),
		"{beforehead}", m.Versions()[len(m.Versions())-2],
		"{next}", migrationtest.Next(t),
		"{versions}", versionList(t),
		"{above14}", strings.Join(m.Versions()[1:], " "),
	).Replace(s)
}

// withFiles returns the embedded directory with files added
// (migrationtest.WithMigrations), each name expanded (expand): a scratch
// migration is named "{next}_description.sql".
func withFiles(t *testing.T, files map[string]string) fstest.MapFS {
	t.Helper()
	return migrationtest.WithMigrations(t, expandNames(t, files))
}

// expandNames returns files with every name expanded.
func expandNames(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for n, c := range files {
		out[expand(t, n)] = c
	}
	return out
}

// expandAll expands every string of ss.
func expandAll(t *testing.T, ss []string) []string {
	t.Helper()
	var out []string
	for _, s := range ss {
		out = append(out, expand(t, s))
	}
	return out
}

// nextVersion is the version after the embedded head.
func nextVersion(t *testing.T) string { t.Helper(); return migrationtest.Next(t) }

// nextFile is the name of a scratch migration of the next version.
func nextFile(t *testing.T, description string) string {
	t.Helper()
	return migrationtest.NextFile(t, description)
}

// allVersions returns the embedded directory's versions, oldest first.
func allVersions(t *testing.T) []string {
	t.Helper()
	return migrationtest.Default(t).Versions()
}

// throughWith returns the embedded directory through version
// (migrationtest.Through) with files added and atlas.sum computed over
// them: for a case that is a fact of the landed versions up to version,
// whatever later versions change.
func throughWith(t *testing.T, version string, files map[string]string) fstest.MapFS {
	t.Helper()
	fs, err := migrationtest.Through(t, version).Dir().Files()
	require.NoError(t, err)
	all := map[string]string{}
	for _, f := range fs {
		all[f.Name()] = string(f.Bytes())
	}
	for n, c := range files {
		all[n] = c
	}
	return migrationtest.SumFS(t, all)
}

// jsonStrings renders ss as a JSON array.
func jsonStrings(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, strconv.Quote(s))
	}
	return "[" + strings.Join(q, ",") + "]"
}
