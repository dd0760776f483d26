package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/cmd/internal/pipeline"
	"github.com/securemsg/storage/internal/migration"
)

// A dropped index that several steps of a query's plan used is named once
// in the QP101 message.
func TestQueryPlansNamesGoneIndexOnce(t *testing.T) {
	m, err := migration.New(sumFS(t, map[string]string{
		"1_t.sql":    "CREATE TABLE t (a INTEGER, b TEXT);\nCREATE INDEX t_a ON t (a);\n",
		"2_drop.sql": "DROP INDEX t_a;\n",
	}), ".")
	require.NoError(t, err)
	q := pipeline.Query{Name: "Both", Kind: ":many", Source: "queries/t.sql",
		SQL: "SELECT b FROM t WHERE a = 1 UNION ALL SELECT b FROM t WHERE a = 2 UNION ALL SELECT b FROM t WHERE a = 3"}
	r, err := pipeline.Lint(context.Background(), m, pipeline.WithQueries([]pipeline.Query{q}))
	require.NoError(t, err)
	var texts []string
	for _, f := range r.Findings {
		if f.Code == pipeline.CodePlanWorse {
			texts = append(texts, f.Text)
		}
	}
	require.Len(t, texts, 1, "%+v", r.Findings)
	require.Equal(t, 3, strings.Count(texts[0], "INDEX t_a"), "the plan before uses it in three steps: %s", texts[0])
	require.Equal(t, 1, strings.Count(texts[0], "index t_a is gone"), texts[0])
}
