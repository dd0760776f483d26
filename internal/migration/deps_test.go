package migration_test

import (
	osexec "os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// heavy matches the import paths an application must not link to apply
// its embedded migrations: Atlas's SQLite driver (schema inspection) and
// the HCL stack it brings. The tools module (cmd/) keeps them.
var heavy = regexp.MustCompile(`ariga\.io/atlas/sql/sqlite|hcl|go-cty|yaml|go-cmp|inflect|doublestar|levenshtein|textseg|wordwrap`)

// TestApplicationLinksNoAtlasDriver lists what the quickstart (an
// application of the library) links, with the go command that builds it,
// and fails on any heavy package: applying the embedded directory needs
// only ariga.io/atlas/sql/migrate.
func TestApplicationLinksNoAtlasDriver(t *testing.T) {
	goCmd, err := osexec.LookPath("go")
	require.NoError(t, err, "the go command that runs this test")
	for _, pkg := range []string{"./examples/quickstart", "./store/sqlitestore"} {
		t.Run(pkg, func(t *testing.T) {
			cmd := osexec.Command(goCmd, "list", "-deps", pkg)
			cmd.Dir = "../.." // the module root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, "ariga.io/atlas/sql/migrate", "the list is the real one")
			var found []string
			for _, d := range deps {
				if heavy.MatchString(d) {
					found = append(found, d)
				}
			}
			require.Empty(t, found, "%s links packages only the tools need", pkg)
		})
	}
}
