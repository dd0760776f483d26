package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// modulePath is the module whose checkout the generators write into.
const modulePath = "github.com/securemsg/storage"

// repoRoot returns the root of the checkout holding the working directory:
// the nearest parent whose go.mod declares modulePath. The commands that
// read or write repository files (hash, plans, schema-doc, freeze,
// fixture-test) resolve their default paths against it, so they do the
// same thing from any directory of the checkout.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNotInRepo
		}
		dir = parent
	}
}

func declaresModule(gomod []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}

// repoPath returns the value of the flag named flag if set, else def
// resolved against the repository root; outside a checkout the error
// names the flag that gives the path.
func repoPath(flag, flagValue, def string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s: %w, or pass %s", def, err, flag)
	}
	return filepath.Join(root, filepath.FromSlash(def)), nil
}

// generatedDoc is the JSON document of plans and schema-doc.
type generatedDoc struct {
	docHeader        // command "plans" or "schema-doc"
	Out       string `json:"out"`     // the file written ("" until known)
	Written   bool   `json:"written"` // false when it was up to date
}

// newGeneratedDoc returns the document of a command that writes a
// generated file, before anything is read.
func newGeneratedDoc(command string) func(string) *generatedDoc {
	return func(string) *generatedDoc { return &generatedDoc{docHeader: docHeader{Command: command}} }
}

// writeGenerated writes a generated file if its content changed, says
// which it did, and records it in doc.
func writeGenerated(env *cmdEnv, doc *generatedDoc, path string, content []byte) error {
	doc.Out = path
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, content) {
		fmt.Fprintf(env.text(), "%s is up to date\n", path)
		return nil
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return err
	}
	doc.Written = true
	fmt.Fprintf(env.text(), "wrote %s\n", path)
	return nil
}
