package frozen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/fixtures/version14"
	"github.com/securemsg/storage/internal/testkit/migrationtest"
)

// legacyFixtureDir is the repository's legacy plaintext fixture.
var legacyFixtureDir = filepath.Join("..", "..", "..", "fixtures", LegacyDir)

// TestProveLegacy proves the legacy plaintext fixture at head and at a
// next head that changes the pending table the upgrade rebuilds, and
// fails a proof whose fixture is not in the legacy layout or whose
// migration changes its data undeclared.
func TestProveLegacy(t *testing.T) {
	ctx := context.Background()
	found, err := FindLegacy(filepath.Dir(legacyFixtureDir))
	require.NoError(t, err)
	require.Equal(t, legacyFixtureDir, found)
	none, err := FindLegacy(t.TempDir())
	require.NoError(t, err)
	require.Empty(t, none)

	// notLegacy holds the version-14 fixture, sealed: no legacy layout.
	notLegacy := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notLegacy, FixtureFile), version14.FixtureSQL(), 0o644))

	for _, tt := range []struct {
		name, dir, next string
		fail            string // in the first failed check, "" when it passes
	}{
		{name: "at head", dir: legacyFixtureDir},
		{
			name: "a next version adds a column with a DEFAULT and an index to the pending table", dir: legacyFixtureDir,
			next: "ALTER TABLE pending_outbound_message ADD COLUMN scratch_attempts INTEGER NOT NULL DEFAULT 0;\n" +
				"CREATE INDEX pending_outbound_message_scratch_attempts ON pending_outbound_message (scratch_attempts);\n",
		},
		{
			// A rebuild resets AUTOINCREMENT's mark to the highest row.
			name: "a next version rebuilds the pending table, losing its high-water mark", dir: legacyFixtureDir,
			fail: "sqlite_sequence pending_outbound_message: 11 before, 10 after",
			next: rebuildAtHead(t, "pending_outbound_message"),
		},
		{
			name: "an undeclared change to a kept column", dir: legacyFixtureDir, next: "UPDATE processed_inbound_message SET processed_at = 1;\n",
			fail: "table processed_inbound_message, row (",
		},
		{
			name: "an undeclared deletion of pending messages", dir: legacyFixtureDir, next: "DELETE FROM pending_outbound_message WHERE sequence > 5;\n",
			fail: "table pending_outbound_message, row (sequence=6): lost",
		},
		{name: "not the legacy layout", dir: notLegacy, fail: "no pending queue in the legacy plaintext layout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := defaultMigrator(t)
			if tt.next != "" {
				m = withNext(t, tt.next, "")
			}
			var out bytes.Buffer
			checks, err := ProveLegacy(ctx, m, tt.dir, &out)
			if tt.fail == "" {
				require.NoError(t, err, out.String())
				require.Greater(t, len(checks), 10)
				require.Contains(t, out.String(), "migrations to head "+m.Head()+" run")
				return
			}
			require.Error(t, err, out.String())
			var failed []Check
			for _, c := range checks {
				if !c.OK {
					failed = append(failed, c)
				}
			}
			require.NotEmpty(t, failed, out.String())
			require.Contains(t, failed[0].Error, tt.fail)
		})
	}
}

// The legacy fixture's own checks leave it as it is.
func TestProveLegacyReadsOnly(t *testing.T) {
	before, err := os.ReadFile(filepath.Join(legacyFixtureDir, FixtureFile))
	require.NoError(t, err)
	_, err = ProveLegacy(context.Background(), migrationtest.Default(t), legacyFixtureDir, &bytes.Buffer{})
	require.NoError(t, err)
	after, err := os.ReadFile(filepath.Join(legacyFixtureDir, FixtureFile))
	require.NoError(t, err)
	require.Equal(t, before, after)
	entries, err := os.ReadDir(legacyFixtureDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"README.md", FixtureFile, "internal"}, names, "nothing written beside the fixture")
}
