package main

import (
	"context"
	"path/filepath"

	"github.com/securemsg/storage/cmd/internal/pipeline"
)

// plansPath is where plans writes, relative to the repository.
const plansPath = "queries/PLANS.md"

func cmdPlans(ctx context.Context, env *cmdEnv) error {
	gdoc := newGeneratedDoc("plans")("")
	env.doc = gdoc
	// The queries are the checkout's: plans runs only inside one.
	root, err := repoRoot()
	if err != nil {
		return err
	}
	out := env.out
	if out == "" {
		out = filepath.Join(root, filepath.FromSlash(plansPath))
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	doc, err := pipeline.PlansDoc(ctx, m, root)
	if err != nil {
		return err
	}
	return writeGenerated(env, gdoc, out, doc)
}
