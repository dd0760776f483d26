package main

import (
	"context"

	"github.com/securemsg/storage/migration/pipeline"
)

// plansPath is where plans writes, relative to the repository.
const plansPath = "queries/PLANS.md"

func cmdPlans(ctx context.Context, env *cmdEnv) error {
	out, err := repoPath(env.out, plansPath)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	m, err := env.migrations()
	if err != nil {
		return err
	}
	doc, err := pipeline.PlansDoc(ctx, m, root)
	if err != nil {
		return err
	}
	return writeGenerated(env, out, doc)
}
