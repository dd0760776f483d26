package pipeline_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// TestSchemaDocSealedColumns builds the reference of a small directory:
// a column is marked sealed only where a comment says so.
func TestSchemaDocSealedColumns(t *testing.T) {
	fsys := sumFS(t, map[string]string{
		"1_init.sql": `-- Every column named "secret" holds a sealed record.

-- Notes, nothing sealed here, although a column is called sealed.
CREATE TABLE note (id INTEGER PRIMARY KEY, sealed BLOB, body TEXT NOT NULL DEFAULT 'x' CHECK (length(body) < 10));

-- Tokens: token is a sealed value bound to the owner.
CREATE TABLE token (owner TEXT NOT NULL PRIMARY KEY, token BLOB NOT NULL, secret BLOB);
`,
		"2_index.sql": "-- Owners are looked up by body.\nCREATE INDEX note_body ON note (body);\n",
	})
	m, err := migration.New(fsys, ".")
	require.NoError(t, err)
	doc, err := pipeline.SchemaDoc(context.Background(), m)
	require.NoError(t, err)
	s := string(doc)
	for _, want := range []string{
		"# Schema reference (version 2)\n",
		"| [`note`](#note) | 3 | none |\n",
		"| [`token`](#token) | 3 | `token`, `secret` |\n",
		"Notes, nothing sealed here, although a column is called sealed.\n",
		"| `sealed` | BLOB | NULL |  |  |  |\n",
		"| `body` | TEXT | NOT NULL | `'x'` | `(length(body) < 10)` |  |\n",
		"| `token` | BLOB | NOT NULL |  |  | **sealed** |\n",
		"| `secret` | BLOB | NULL |  |  | **sealed** |\n",
		"| `note_body` | no | (`body`) |  | Owners are looked up by body. |\n",
		"\n## schema_revision\n",
	} {
		require.Contains(t, s, want)
	}
	require.NotContains(t, s, `Every column named "secret"`, "the file header is a rule, not a table's description")
}
