package main

import (
	"context"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// schemaDocPath is where schema-doc writes, relative to the repository.
const schemaDocPath = "schema/SCHEMA.md"

// cmdSchemaDoc writes the schema reference: Atlas's inspection of a
// database migrated to head, described with the migrations' own comments.
func cmdSchemaDoc(ctx context.Context, env *cmdEnv) error {
	gdoc := newGeneratedDoc("schema-doc")("")
	env.doc = gdoc
	out, err := repoPath("-out FILE", env.out, schemaDocPath)
	if err != nil {
		return err
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	doc, err := pipeline.SchemaDoc(ctx, m)
	if err != nil {
		return err
	}
	return writeGenerated(env, gdoc, out, doc)
}
