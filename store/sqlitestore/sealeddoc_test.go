package sqlitestore

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecurityListsEverySealedTable: SECURITY.md's table of sealed
// records names exactly the tables the key rotation walks (sealedTables),
// so that a table given a sealed column is documented where the others
// are, and nowhere else lists them.
func TestSecurityListsEverySealedTable(t *testing.T) {
	b, err := os.ReadFile("../../SECURITY.md")
	require.NoError(t, err)
	row := regexp.MustCompile("^\\| \\d+ `Record\\w+` \\| `(\\w+)\\.\\w+` \\|")
	var doc []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			doc = append(doc, m[1])
		}
	}
	var code []string
	for _, st := range sealedTables {
		code = append(code, st.name)
	}
	sort.Strings(doc)
	sort.Strings(code)
	require.Equal(t, code, doc)
}
