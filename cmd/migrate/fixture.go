package main

import (
	"context"

	"github.com/securemsg/storage/fixtures/version14"
)

// fixture-test runs the frozen v14 fixture proof: version14.Prove migrates
// a temporary copy of the fixture to head and checks it, one line a check.
// It never touches the frozen fixture itself.
func init() {
	commands = append(commands, &command{
		name: "fixture-test", args: "", summary: "migrate a temporary copy of the frozen v14 fixture to head and check it",
		run: func(ctx context.Context, env *cmdEnv) error {
			return version14.Prove(ctx, env.stdout)
		},
	})
}
